"""Helpers the bundled plugins share: the mesh's layout, index-state parsing, merging day files
block by block, the distillation prompt, and the one match a lookup must pick.

No module here implements a hook. Plugins import these helpers, never each other's modules, so
any bundled plugin can be replaced without breaking another.
"""
