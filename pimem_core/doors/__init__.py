"""The front doors: the ``pimem`` command line and ``pimem serve``, the host protocol.

Both are built from one command table (:mod:`pimem_core.doors.commands`). Nothing is imported
here: the launcher must write ``pimem serve``'s ready line before the rest of pimem loads.
"""
