"""Retrieval quality, the ``quality`` part of ``python -m bench`` (``--only quality``).

``vocabulary``, ``facts``, ``sessions`` and ``corpus`` generate a world of coding sessions by
seed (several projects, daily memory files, pi transcripts with branches and forks);
``queries`` asks for its facts in three styles; ``run`` measures pimem's hybrid search against
its dense and BM25 halves on the same index, auto-context abstention, cross-repo labels and
the anchor-to-turn chain; ``summary`` and ``report`` turn the raw records into the quality
section of ``docs/benchmarks.md``.
"""
