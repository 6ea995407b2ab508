"""What a query may be, checked once for every door: text, not empty, within the size limit.

The web API answers the same rule with 413 before reading a body it cannot use
(kb/doors/web/api.py calls `size_error`); everything else raises QueryError here.
"""

from __future__ import annotations

import re

from .errors import QueryError

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """Lone surrogates (undecodable bytes in argv, "\\ud800" in a JSON body) cannot be encoded as
    UTF-8 and crash the tokenizer deep inside a search: they become U+FFFD, as bad stdin bytes do."""
    return _SURROGATE.sub("\ufffd", text)


def size_error(size: int, max_bytes: int, hint: str = "Paste the part of the log around the error.") -> str:
    """The message for a query of `size` bytes over the limit (every door says the same)."""
    return f"the query is {size} bytes; the limit is {max_bytes} (KB_MAX_QUERY_BYTES). {hint}"


def check_query(query: str, max_bytes: int) -> str:
    """Refuse what no search can use, with a message that says what to do; NUL bytes become spaces."""
    if not isinstance(query, str):
        raise QueryError("the query must be text")
    size = len(query.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise QueryError(size_error(size, max_bytes))
    query = valid_text(query).replace("\x00", " ")
    if not query.strip():
        raise QueryError("the query is empty: paste an error message or ask a question")
    return query
