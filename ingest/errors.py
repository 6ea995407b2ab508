"""The one exception hierarchy: a problem the user can fix, with a message that says how.

It is rooted here, in the bottom layer, so that every layer raises a subclass of the same
KbError: ingest (UnreadableFile), index (IndexError_, ModelError), kb (ConfigError, QueryError,
LlmError). Each door catches KbError once and shows its message without a traceback; anything
else is a bug and keeps its traceback (in the server's log for the HTTP doors).
"""

from __future__ import annotations


class KbError(Exception):
    """A problem the user can fix; the message says how."""
