"""The pi adapter's Python side: ``pimem setup pi`` (the ``pi-setup`` plugin), which registers
the pi package this pimem carries with pi and records which ``pimem`` its extension runs.

The pi package itself (extension, skills, prompt template) is ``adapters/pi`` in the source
tree; the wheel carries it as ``pimem_plugins/pi/package/`` (ADR 0023).
"""
