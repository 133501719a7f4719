"""Rules without I/O: paths and admission, limits, metadata and ttl, codecs, messages and the
transcript, the journal's object models (`journal_objects`, `state`, `index`, `parts`) and the operation
each commit carries (`operations`), merging, search tokens and BM25 segments, the data map and the export
archive's format. Nothing here touches storage.
"""
