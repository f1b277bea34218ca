"""The parts of the typed facade :class:`pimem_core.api.Pimem`, the one caller of ``pm.hook``.

Each part gives one group of hooks typed methods, on the floor :class:`~.opened.OpenedServices`
lays (the settings, the plugin manager, each service opened once per scope, a hook's answer
checked):

``opened``
    the floor: opening the store, index, transcript reader and skill catalog, checking answers
``writing``
    what changes memory through the store: entries written and forgotten, changes announced
``recall``
    what goes through the index: indexing, search (and reranking), expansion, compaction
``host``
    what a host session asks: its start, the snapshot, the per-prompt injections, the
    distiller and its gates, transcripts, a model for background work
``upkeep``
    what plugins add around memory: maintenance tasks, skill candidates, commands, files loaded
``status``
    ``pimem status``: the index's and every plugin's sections, the plugins' settings
"""
