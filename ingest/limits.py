"""How much one document may cost to ingest: its bytes, its longest line, its entries, its time.

Each bound names the setting that raises it (kb/config.py: KB_MAX_FILE_BYTES, ...); the core
passes the configured Limits down, and ingest/ reads no environment itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    # Real FAQ pages have tens to a few hundred entries; the largest in ../shared has under 200.
    max_file_entries: int = 5000
    max_file_seconds: float = 30.0
    # A larger file is almost certainly not an FAQ page (a dump, a dataset); refuse it by name
    # instead of spending minutes parsing it.
    max_file_bytes: int = 32 * 1024 * 1024
    # A FAQ line is a sentence or a log line; a megabyte on one line is minified or generated text
    # (a JSON dump, an inlined image) that would become one useless, slow-to-index entry.
    max_line_chars: int = 1024 * 1024


DEFAULT = Limits()
