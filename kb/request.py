"""What a request to a door that takes fields may hold, checked the same way for every such door:
the HTTP API (kb/doors/web/api.py) and the MCP tools (kb/doors/mcp/) give the same messages and
the same statuses (413 for a query over the size limit, 422 for a field that cannot be used,
404 for an entry that is not there). A door turns a RequestError into its own shape: the API
into `{"error", "status"}` with that HTTP status, MCP into a tool error carrying the same JSON.
"""

from __future__ import annotations

import json
from typing import Any

from .config import MAX_K
from .errors import KbError
from .query import size_error

MAX_HISTORY_TURNS = 50
SIZE_HINT = "Send the part of the log around the error."


class RequestError(KbError):
    """A request field that cannot be used; `status` is the HTTP status the API answers with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def as_json(self) -> dict:
        return {"error": self.message, "status": self.status}


def json_type(v: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(v), "null" if v is None else type(v).__name__
    )


def known_fields(body: dict, fields: tuple[str, ...]) -> None:
    """A field the request does not take is refused by name: `top_k` for `k` was ignored and
    the search ran with 5 hits, the one mistake in a body that went unsaid."""
    unknown = [name for name in body if name not in fields]
    if unknown:
        raise RequestError(
            422, f"unknown field {json.dumps(unknown[0])[:60]}; this request takes {', '.join(fields)}"
        )


def query_field(body: dict, max_bytes: int, name: str = "query") -> str:
    if name not in body or body[name] is None:
        raise RequestError(422, f'missing field "{name}" (the error, log or question, as a string)')
    query = body[name]
    if not isinstance(query, str):
        raise RequestError(422, f'field "{name}" must be a string, not {json_type(query)}')
    size = len(query.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise RequestError(413, size_error(size, max_bytes, SIZE_HINT))
    return query


def lang_field(body: dict) -> str | None:
    lang = body.get("lang")
    if lang in (None, "", "auto"):
        return None
    if lang not in ("zh", "en"):
        raise RequestError(422, f'field "lang" must be "zh", "en" or null, not {json.dumps(lang)[:40]}')
    return lang


def k_field(body: dict) -> int | None:
    k = body.get("k")
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise RequestError(422, f'field "k" must be an integer from 1 to {MAX_K}')
    return k


def history_field(body: dict) -> list[tuple[str, str]]:
    """Earlier turns, as OpenAI-style {"role", "content"} objects or [role, text] pairs."""
    turns = body.get("history")
    if turns is None:
        return []
    if not isinstance(turns, list):
        raise RequestError(
            422, 'field "history" must be a list of {"role": "user"|"assistant", "content": str}'
        )
    if len(turns) > MAX_HISTORY_TURNS:
        raise RequestError(422, f'field "history" has {len(turns)} turns; the limit is {MAX_HISTORY_TURNS}')
    out = []
    for i, turn in enumerate(turns):
        if isinstance(turn, dict):
            role, content = turn.get("role"), turn.get("content")
        elif isinstance(turn, list) and len(turn) == 2:
            role, content = turn
        else:
            role = content = None
        if role not in ("user", "assistant") or not isinstance(content, str):
            raise RequestError(422, f'history[{i}] must be {{"role": "user"|"assistant", "content": str}}')
        out.append((role, content))
    return out
