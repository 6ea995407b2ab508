"""Entry records -> index on disk; search. Imports ingest only."""
