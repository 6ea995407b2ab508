"""The JSON API of `kb serve`, under /api/ (and the entry pages the chat's side panel opens).

    POST /api/search   {"query": str, "k"?: int, "lang"?: "zh"|"en"|null}       -> schema.search_json
    POST /api/ask      {"query": str, "lang"?: ..., "history"?: [{"role", "content"}]} -> schema.ask_json
    GET  /api/health   index stats (entries per language, embedder, build time)
    GET  /api/entry/ID schema.entry_json (the entry and its other-language version)
    POST /api/feedback {"query", "vote": "up"|"down", "comment"?, "right_entry"?, "lang"?, "answer"?} (feedback_api.py)
    GET  /entry/ID     the entry as HTML (`?fragment=1`: the piece the chat's side panel shows)

Errors are JSON `{"error", "status"}`; a KbError the user can fix (an empty query, ...) is 422.
fastapi and starlette are imported inside `add_api`.
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoints' annotations
# (`request: Request`) at runtime, and Request is imported inside the function that adds them.
import html
import json

from ...errors import KbError
from ...request import RequestError as ApiError
from ...request import history_field, k_field, known_fields, lang_field, query_field
from ..host.live import LiveKb
from .render import entry_html, html_page


async def _read_json(request) -> dict:
    """The request body as a JSON object. Its size is already bounded: `BodyLimit` answers 413
    for anything over the limit before a route runs. Only a JSON content type is read: text/plain
    is what a cross-site page can send without a preflight (kb/web_guard.py refuses those too)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise ApiError(
            415,
            f"send the body as JSON with Content-Type: application/json (not {ctype or 'no content type'})",
        )
    raw = await request.body()
    if not raw.strip():
        raise ApiError(400, 'empty request body: send a JSON object such as {"query": "NCCL error(2)"}')
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:  # ValueError covers bad JSON and bad UTF-8
        raise ApiError(400, f"the request body is not valid JSON ({str(e)[:120]})") from None
    if not isinstance(body, dict):
        raise ApiError(400, 'the request body must be a JSON object such as {"query": "NCCL error(2)"}')
    return body


# The routes, for the words that list them (the 404 here, `kb serve`'s first line, the chat's
# About): three lists written apart had drifted, two of them without /api/feedback.
API_ROUTES = (
    ("POST", "/api/ask"),
    ("POST", "/api/search"),
    ("POST", "/api/feedback"),
    ("GET", "/api/health"),
    ("GET", "/api/entry/ID"),
)
API_LIST = ", ".join(f"{method} {path}" for method, path in API_ROUTES)

# The fields' rules are the core's (kb/request.py), shared with the MCP door.
_query, _lang, _k, _history = query_field, lang_field, k_field, history_field


def public_stats(stats: dict) -> dict:
    """kb.stats() for anyone who can reach the server: folder names, not this machine's paths."""
    from pathlib import PurePath

    return {
        **stats,
        "index": PurePath(stats["index"]).name,
        "sources": [PurePath(s).name for s in stats.get("sources", [])],
        # A skipped file's reason may name a path outside the docs (a link's target): counts only.
        "skipped": len(stats.get("skipped", [])),
        "warnings": len(stats.get("warnings", [])),
    }


def _error(status: int, message: str):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": message, "status": status}, status_code=status)


def add_api(app, live: LiveKb) -> None:
    """The routes above, and JSON errors for everything under /api/."""
    from .feedback_api import add_feedback_api

    _add_queries(app, live)
    _add_reads(app, live)
    add_feedback_api(app, live)
    _add_fallbacks(app)


def _add_queries(app, live: LiveKb) -> None:
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    from ...feedback import Recording, open_store
    from ...schema import ask_json, search_json

    settings = live.kb.settings
    store = open_store(settings)  # a "no match" lands in the unanswered queue (kb/feedback.py)

    @app.exception_handler(ApiError)
    async def _api_error(_request, e: ApiError):
        return _error(e.status, e.message)

    @app.exception_handler(KbError)
    async def _user_error(_request, e: KbError):  # an empty query etc.: the user can fix it
        return _error(422, str(e))

    @app.post("/api/search")
    async def api_search(request: Request):
        body = await _read_json(request)
        known_fields(body, ("query", "k", "lang"))
        query, k, lang = _query(body, settings.max_query_bytes), _k(body), _lang(body)
        kb = Recording(live.get(), store, "api")
        result = await run_in_threadpool(kb.search, query, k, lang)  # CPU work off the event loop
        return JSONResponse(search_json(result))

    @app.post("/api/ask")
    async def api_ask(request: Request):
        body = await _read_json(request)
        known_fields(body, ("query", "lang", "history"))
        query, lang, history = _query(body, settings.max_query_bytes), _lang(body), _history(body)
        kb = Recording(live.get(), store, "api")
        answer = await run_in_threadpool(lambda: kb.ask(query, lang=lang, history=history))
        return JSONResponse(ask_json(answer))


def _add_reads(app, live: LiveKb) -> None:
    from fastapi.responses import HTMLResponse, JSONResponse

    from ...schema import entry_json

    # HEAD is answered wherever GET is (FastAPI's `get` leaves it out; api_other would say 405).
    @app.api_route("/api/health", methods=["GET", "HEAD"])
    def api_health():
        kb = live.get()
        return {"status": "ok", **public_stats(kb.stats()), "llm": kb.settings.llm.model or None}

    @app.api_route("/api/entry/{entry_id}", methods=["GET", "HEAD"])
    def api_entry(entry_id: str):
        kb = live.get()
        e = kb.entry(entry_id)
        if e is None:
            raise ApiError(404, f"no entry {entry_id!r} in the index")
        return JSONResponse(entry_json(e, kb.entry(e.translation) if e.translation else None))

    @app.api_route("/entry/{entry_id}", methods=["GET", "HEAD"], response_class=HTMLResponse)
    def entry_page(entry_id: str, fragment: str = ""):
        bare = fragment not in ("", "0")
        kb = live.get()
        e = kb.entry(entry_id)
        if e is None:
            body = f"<p>No entry <code>{html.escape(entry_id)}</code> in the index.</p>"
            return HTMLResponse(body if bare else html_page("404", body), status_code=404)
        piece = entry_html(kb, e)
        return HTMLResponse(piece if bare else html_page(e.title, piece))


def _add_fallbacks(app) -> None:
    from fastapi import Request

    # Anything else under /api/ answers JSON too (the chat, mounted at /, would answer HTML).
    # The routes above took every right method on their paths, so a known path here has a wrong one.
    known = {path: method for method, path in API_ROUTES if not path.endswith("/ID")}

    @app.api_route("/api/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    def api_other(rest: str, request: Request):
        path = "/api/" + rest
        entry_id = rest.removeprefix("entry/") if rest.startswith("entry/") else ""
        if entry_id and request.method in ("GET", "HEAD"):
            # An id the route's {entry_id} does not take, e.g. one with a slash: no such entry.
            return _error(404, f"no entry {entry_id!r} in the index")
        allowed = "GET" if entry_id else known.get(path)
        if allowed:
            resp = _error(405, f"{path} takes {allowed}, not {request.method}")
            resp.headers["Allow"] = "GET, HEAD" if allowed == "GET" else allowed
            return resp
        return _error(
            404,
            f"no API endpoint {path}; see {API_LIST}",
        )

    @app.exception_handler(Exception)
    async def _unexpected(_request, e: Exception):  # a bug: JSON for the client, traceback in the log
        return _error(500, f"internal error: {type(e).__name__}")
