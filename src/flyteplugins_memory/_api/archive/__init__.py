"""Export and import archives: `export`, `import_archive`, and the archive file and spool they use."""
