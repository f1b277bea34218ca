"""pimem's benchmarks: ``python -m bench [--quick] [--out DIR]`` (or ``make bench``).

``corpus`` generates realistic daily memory files by seed, ``latency`` measures search and
append-to-searchable latency against the ``memsearch`` CLI in the same run, and ``report``
turns the raw results into plots and ``docs/benchmarks.md``.
"""
