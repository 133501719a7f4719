"""The foundation every layer uses: the sync/async convention (`syncify`), upstream compatibility
(`compat`), retries (`retry`) and the package version (`version`). Imports nothing of the package but
`errors`.
"""
