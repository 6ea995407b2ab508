"""`POST /api/feedback`: a vote on an answer, from a script or another front end.

    {"query": str, "vote": "up"|"down", "comment"?: str, "right_entry"?: str, "lang"?: "zh"|"en"|null,
     "answer"?: the JSON /api/ask or /api/search returned for the query}
    -> 201 {"id": n, "vote": ..., "in_queue": bool, "shown": {"match", "entries": [...]}}

What was shown is stored with the vote (its entries, match strength and the index generation).
With `answer`, it is what that answer showed: with a language model, /api/ask may cite another
entry than retrieval's first, or say that none applies, and a vote is about what the person
read. Without it, it is what retrieval shows for the query now. `right_entry` names the entry
that answers it: its id, its `doc:start-end` or its title; a name that matches no entry is a
422 saying so, as is an answer naming an entry this index does not hold. Errors
have the API's shape and statuses (413 over the query limit, 422 for a field, 503 when feedback
is turned off). The vote goes to the store every door shares (kb/feedback.py).
"""

# No `from __future__ import annotations` here: FastAPI reads `request: Request` at runtime.
from ...answer_json import shown_in_answer
from ...errors import KbError
from ...feedback import (
    MAX_COMMENT_CHARS,
    VOTES,
    Shown,
    generation_of,
    named_entry,
    open_store,
    shown_by,
)
from ...request import RequestError, json_type, lang_field, query_field
from ..host.live import LiveKb


def _text_field(body: dict, name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(422, f'field "{name}" must be a string, not {json_type(value)}')
    if len(value) > limit:
        raise RequestError(422, f'field "{name}" has {len(value)} characters; the limit is {limit}')
    return value


def _vote_field(body: dict) -> str:
    vote = body.get("vote")
    if vote not in VOTES:
        raise RequestError(422, 'field "vote" must be "up" or "down"')
    return vote


def _shown_field(body: dict, query: str, kb) -> Shown | None:
    """What the `answer` the client got showed (kb/answer_json.py); None when not given."""
    if body.get("answer") is None:
        return None
    try:
        return shown_in_answer(kb, query, body["answer"])
    except KbError as e:
        raise RequestError(422, f'field "answer": {e}') from None


def add_feedback_api(app, live: LiveKb) -> None:
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    from .api import _read_json

    settings = live.kb.settings
    store = open_store(settings)

    @app.post("/api/feedback")
    async def api_feedback(request: Request):
        body = await _read_json(request)
        query, vote, lang = query_field(body, settings.max_query_bytes), _vote_field(body), lang_field(body)
        comment = _text_field(body, "comment", MAX_COMMENT_CHARS) or ""
        named = _text_field(body, "right_entry", 1000)
        if store is None:
            raise RequestError(503, "feedback is turned off on this server (feedback = false)")

        def record() -> dict:
            kb = live.get()
            try:
                right = named_entry(kb, named)
            except KbError as e:  # a name that matches nothing: the person can correct it
                raise RequestError(422, f'field "right_entry": {e}') from None
            shown = _shown_field(body, query, kb) or shown_by(kb.search(query, lang=lang))
            row_id = store.add("api", query, shown, generation_of(kb), vote, comment, right)
            row = store.get(row_id)
            in_queue = row is not None and row.in_queue
            entries = list(shown.entries)
            return {
                "id": row_id,
                "vote": vote,
                "in_queue": in_queue,
                "shown": {"match": shown.match, "entries": entries},
            }

        return JSONResponse(await run_in_threadpool(record), status_code=201)
