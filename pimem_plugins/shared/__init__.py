"""Helpers the bundled plugins share: the mesh's layout, the day-file format, index-state
parsing, the distillation prompt and maintenance plumbing.

No module here implements a hook. Plugins import these helpers, never each other's modules, so
any bundled plugin can be replaced without breaking another.
"""
