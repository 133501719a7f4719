"""The public facade: `MemoryStore` (`store`) built from families (files, transcript, history and time
travel, staged memories, search, upkeep, archives), scopes, time travel and the report.
"""
