"""Markdown FAQ files -> Entry records. Imports nothing else from the project."""
