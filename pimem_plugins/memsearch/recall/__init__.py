"""pimem's own recall over memsearch's collection: a read model and the ranking on it.

The collection stays memsearch's and stays the source for every agent; the read model is a
cache of it (plus one vector per fact that pimem computes itself), kept in the process that
searches. See ADR 0013.
"""
