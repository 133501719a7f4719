"""The journal's reads and writes on storage, through `journal_storage.JournalStorage` (the journal's names
mapped to where it lives, beside the store prefix): opening a state, committing, checkpoints, gc,
purge and its redaction, retention, audit, history and the commit log, keys, generations and store
deletion, search segments and export state. Built on `storage` and `_rules`.
"""
