"""The core's errors, all KbError (ingest/errors.py roots the hierarchy for every layer)."""

from __future__ import annotations

from ingest.errors import KbError


class ConfigError(KbError):
    """A setting in kb.toml or a KB_* variable that cannot be used; one line says which and why."""


class QueryError(KbError):
    """A query no search can use (empty, too large, not text)."""


class LlmError(KbError):
    """The language model cannot be used as configured; the message says what to change."""


__all__ = ["ConfigError", "KbError", "LlmError", "QueryError"]
