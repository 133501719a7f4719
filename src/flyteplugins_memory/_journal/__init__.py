"""The journal's reads and writes on storage: opening a state, committing, checkpoints, gc,
purge and its redaction, retention, audit, history and the commit log, keys, generations and store
deletion, search segments and export state. Built on `storage` and `_rules`.
"""
