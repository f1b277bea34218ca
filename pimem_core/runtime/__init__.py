"""The session runtime: what pimem does for one host session, in the background of the agent.

A :class:`~pimem_core.runtime.session.Session` resolves its scope, keeps the stable snapshot,
queues settled exchanges for capture (with its journal and the distillation budget), schedules
index runs and wakes maintenance, all as tasks of its one scheduler. It works through the facade
(:class:`pimem_core.api.Pimem`) only, so whatever plugins provide the backends serve it.
"""
