"""Adapters that let other agent frameworks keep their memory in a flyteplugins-memory store.

One module per framework, each built on the package's public API only and importing its framework
lazily (the framework is never a dependency of this package). Each maps the framework's scopes (user,
session, agent) onto keys, scopes and record logs, so different users and sessions never mix and
concurrent tasks writing one key merge instead of conflicting (one record per object, never one
whole-table file). Import the module of the framework you use, e.g.
``from flyteplugins_memory.adapters.orbiter import OrbiterMemoryStore``.
"""
