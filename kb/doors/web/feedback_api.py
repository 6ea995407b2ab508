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
from ...schema import entry_ref
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


MAX_SHOWN_ENTRIES = 100
STRENGTHS = ("match", "weak", "none")


def _listed(answer: dict, name: str) -> list:
    items = answer.get(name) or []
    if not isinstance(items, list):
        raise RequestError(422, f'field "answer": "{name}" must be a list, not {json_type(items)}')
    return items


def _shown_field(body: dict, query: str, kb) -> Shown | None:
    """What the `answer` a client got (the JSON of /api/ask or /api/search) showed, checked
    against this index; None when the field is not given."""
    answer = body.get("answer")
    if answer is None:
        return None
    if not isinstance(answer, dict):
        raise RequestError(
            422,
            f'field "answer" must be the object /api/ask or /api/search returned, not {json_type(answer)}',
        )
    if answer.get("match") not in STRENGTHS:
        raise RequestError(422, 'field "answer" has no "match" of "match", "weak" or "none"')
    echoed = answer.get("query")
    # A follow-up in a conversation may be answered as searched with the earlier question before it.
    if isinstance(echoed, str) and not answer.get("query_truncated") and query not in echoed:
        raise RequestError(422, 'field "answer" answers another query than "query"')
    # The entries it showed, read as shown_by reads an Answer (ask) or a SearchResult (search).
    nearest = _listed(answer, "suggestions") if answer["match"] == "none" else []
    if "citations" in answer:
        listed = nearest + _listed(answer, "citations")
    else:
        listed = nearest or _listed(answer, "hits")
    lang = "zh" if answer.get("lang") == "zh" else "en"  # as shown_by stores it
    entries = tuple(entry_ref(_entry_shown(item, lang, kb)) for item in listed[:MAX_SHOWN_ENTRIES])
    return Shown(answer["match"], lang, entries)


def _entry_shown(item, lang: str, kb):
    """The entry an answer's hit or citation showed: in the reader's language when the hit
    carries its translation, as the doors show it (kb.answer.entry_in)."""
    entries, by_id = kb.index.entries, kb.index.by_id
    entry_id = item.get("entry_id") if isinstance(item, dict) else None
    if not isinstance(entry_id, str) or entry_id not in by_id:
        raise RequestError(
            422,
            f'field "answer" shows an entry this index does not hold ({str(entry_id)[:80]!r}): '
            'send the answer this server gave, or leave "answer" out',
        )
    entry = entries[by_id[entry_id]]
    translated = item.get("translation")
    other = translated.get("entry_id") if isinstance(translated, dict) else None
    if entry.lang != lang and other in by_id and entries[by_id[other]].lang == lang:
        return entries[by_id[other]]
    return entry


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
