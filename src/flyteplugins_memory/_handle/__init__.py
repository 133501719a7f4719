"""The handle: its session with the journal (`session`: load, save, refresh, checkpoint), its
working copy (`view`: committed base plus unsaved changes), the working root in upstream's layout
(`mirror`), commits that are more than a save (`special_commits`) and the search cache.
"""
