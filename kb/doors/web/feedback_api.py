"""`POST /api/feedback`: a vote on an answer, from a script or another front end.

    {"query", "vote": "up"|"down", "comment"?, "right_entry"?, "lang"?, "answer"?}
    -> 201 {"id": n, "vote": ..., "in_queue": bool, "shown": {"match", "entries": [...]}}

The fields, what is stored and the refusals are kb/vote.py's, shared with the MCP `feedback`
tool. Errors have the API's shape and statuses: 413 over the query limit, 422 for a field (a
`right_entry` that names no entry, an `answer` given for another question or naming an entry
this index does not hold), 503 when feedback is turned off.
"""

# No `from __future__ import annotations` here: FastAPI reads `request: Request` at runtime.
from ...feedback import open_store
from ...vote import record_vote, vote_fields, vote_json
from ..host.live import LiveKb


def add_feedback_api(app, live: LiveKb) -> None:
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    from .api import _read_json

    settings = live.kb.settings
    store = open_store(settings)

    @app.post("/api/feedback")
    async def api_feedback(request: Request):
        vote = vote_fields(await _read_json(request), settings.max_query_bytes)
        row = await run_in_threadpool(lambda: record_vote(live.get(), store, "api", vote))
        return JSONResponse(vote_json(row), status_code=201)
