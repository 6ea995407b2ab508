"""The web door: one server with the Gradio chat at `/` and a JSON API under `/api/`.

    POST /api/search   {"query": str, "k"?: int, "lang"?: "zh"|"en"|null}       -> schema.search_json
    POST /api/ask      {"query": str, "lang"?: ..., "history"?: [{"role", "content"}]} -> schema.ask_json
    GET  /api/health   index stats (entries per language, embedder, build time)
    GET  /api/entry/ID schema.entry_json (the entry and its other-language version)
    GET  /entry/ID     the entry as HTML (`?fragment=1`: the piece the chat's side panel shows)

One KnowledgeBase is opened at start and shared read-only by every request; a rebuilt index is
picked up in the background (`LiveKb`). The page holds no retrieval logic: it calls `kb.ask`
and only renders the Answer (kb/web_page.py). Every request body, on every route, is bounded by
`BodyLimit`. gradio / fastapi / uvicorn are imported inside the functions.
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoints' annotations
# (`request: Request`) at runtime, and Request is imported inside the function that adds them.
import asyncio
import html
import json
import logging
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from .answer import Answer
from .service import KbError, KnowledgeBase, QueryError

# The renderers and the page live in kb/web_page.py; re-exported here because callers and tests
# know them as kb.web.*.
from .web_page import (  # noqa: F401
    EXAMPLES,
    I18N,
    LANG_CHOICES,
    PAGE_CSS,
    PAGE_HEAD,
    PANEL_HTML,
    UI,
    code_block,
    entry_html,
    entry_link,
    escape_md_html,
    html_page,
    link_citations,
    render_answer,
    render_user,
)

log = logging.getLogger("kb.web")

RELOAD_CHECK_S = 5.0  # how often (at most) a request looks for a rebuilt index
BODY_HEADROOM = 64 * 1024  # JSON envelope + history on top of settings.max_query_bytes
MAX_HISTORY_TURNS = 50
MAX_K = 50
STREAM_MIN_INTERVAL_S = 0.05  # do not push more than ~20 partial updates a second to the browser
# After a 413 the rest of the refused body is read and dropped (see BodyLimit): at most this much,
# for at most this long, until the client pauses this long.
DRAIN_MAX_BYTES = 64 * 1024 * 1024
DRAIN_MAX_S = 10.0
DRAIN_IDLE_S = 1.0


# --------------------------------------------------------------------------------------------
# The shared knowledge base
# --------------------------------------------------------------------------------------------
class LiveKb:
    """The one KnowledgeBase every request uses. At most every `interval` seconds a request
    starts a background check for a rebuilt index; the swap inside `reload_if_changed` is
    atomic, so requests never wait for a reload and never see half an index."""

    def __init__(self, kb: KnowledgeBase, interval: float = RELOAD_CHECK_S) -> None:
        self.kb = kb
        self.interval = interval
        self._next_check = time.monotonic() + interval
        self._checking = threading.Lock()

    def get(self) -> KnowledgeBase:
        now = time.monotonic()
        if now >= self._next_check and self._checking.acquire(blocking=False):
            self._next_check = now + self.interval
            threading.Thread(target=self._reload, name="kb-reload", daemon=True).start()
        return self.kb

    def _reload(self) -> None:
        try:
            if self.kb.reload_if_changed():
                log.warning("kb serve: loaded the rebuilt index %s", self.kb.index.manifest.get("generation"))
        except Exception as e:  # a broken rebuild must not take the server down: keep the old index
            log.warning("kb serve: could not load the rebuilt index (%s); still serving the old one", e)
        finally:
            self._checking.release()


# --------------------------------------------------------------------------------------------
# JSON API
# --------------------------------------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


def _query(body: dict, max_bytes: int) -> str:
    if "query" not in body:
        raise ApiError(422, 'missing field "query" (the error, log or question, as a string)')
    query = body["query"]
    if not isinstance(query, str):
        raise ApiError(422, f'field "query" must be a string, not {_json_type(query)}')
    size = len(query.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise ApiError(
            413,
            f"the query is {size} bytes; the limit is {max_bytes} (KB_MAX_QUERY_BYTES). Send the part of the log around the error.",
        )
    return query


def _lang(body: dict) -> str | None:
    lang = body.get("lang")
    if lang in (None, "", "auto"):
        return None
    if lang not in ("zh", "en"):
        raise ApiError(422, f'field "lang" must be "zh", "en" or null, not {json.dumps(lang)[:40]}')
    return lang


def _k(body: dict) -> int | None:
    k = body.get("k")
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ApiError(422, f'field "k" must be an integer from 1 to {MAX_K}')
    return k


def _history(body: dict) -> list[tuple[str, str]]:
    """Earlier turns, as OpenAI-style {"role", "content"} objects or [role, text] pairs."""
    turns = body.get("history")
    if turns is None:
        return []
    if not isinstance(turns, list):
        raise ApiError(422, 'field "history" must be a list of {"role": "user"|"assistant", "content": str}')
    if len(turns) > MAX_HISTORY_TURNS:
        raise ApiError(422, f'field "history" has {len(turns)} turns; the limit is {MAX_HISTORY_TURNS}')
    out = []
    for i, turn in enumerate(turns):
        if isinstance(turn, dict):
            role, content = turn.get("role"), turn.get("content")
        elif isinstance(turn, list) and len(turn) == 2:
            role, content = turn
        else:
            role = content = None
        if role not in ("user", "assistant") or not isinstance(content, str):
            raise ApiError(422, f'history[{i}] must be {{"role": "user"|"assistant", "content": str}}')
        out.append((role, content))
    return out


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(v), "null" if v is None else type(v).__name__
    )


def public_stats(stats: dict) -> dict:
    """kb.stats() for anyone who can reach the server: folder names, not this machine's paths."""
    from pathlib import PurePath

    return {
        **stats,
        "index": PurePath(stats["index"]).name,
        "sources": [PurePath(s).name for s in stats.get("sources", [])],
    }


def _error(status: int, message: str):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": message, "status": status}, status_code=status)


def _add_api(app, live: LiveKb) -> None:
    from fastapi import Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.concurrency import run_in_threadpool

    from .schema import ask_json, entry_json, search_json

    settings = live.kb.settings

    @app.exception_handler(ApiError)
    async def _api_error(_request, e: ApiError):
        return _error(e.status, e.message)

    @app.exception_handler(QueryError)
    async def _query_error(_request, e: QueryError):  # empty query etc.: the user can fix it
        return _error(422, str(e))

    @app.post("/api/search")
    async def api_search(request: Request):
        body = await _read_json(request)
        query, k, lang = _query(body, settings.max_query_bytes), _k(body), _lang(body)
        result = await run_in_threadpool(live.get().search, query, k, lang)  # CPU work off the event loop
        return JSONResponse(search_json(result))

    @app.post("/api/ask")
    async def api_ask(request: Request):
        body = await _read_json(request)
        query, lang, history = _query(body, settings.max_query_bytes), _lang(body), _history(body)
        answer = await run_in_threadpool(lambda: live.get().ask(query, lang=lang, history=history))
        return JSONResponse(ask_json(answer))

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
        fragment = fragment not in ("", "0")
        kb = live.get()
        e = kb.entry(entry_id)
        if e is None:
            body = f"<p>No entry <code>{html.escape(entry_id)}</code> in the index.</p>"
            return HTMLResponse(body if fragment else html_page("404", body), status_code=404)
        piece = entry_html(kb, e)
        return HTMLResponse(piece if fragment else html_page(e.title, piece))

    # Anything else under /api/ answers JSON too (the chat, mounted at /, would answer HTML).
    # The routes above took every right method on their paths, so a known path here has a wrong one.
    known = {"/api/search": "POST", "/api/ask": "POST", "/api/health": "GET"}

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
        return _error(404, f"no API endpoint {path}; see /api/health, POST /api/search, POST /api/ask")

    @app.exception_handler(Exception)
    async def _unexpected(_request, e: Exception):  # a bug: JSON for the client, traceback in the log
        return _error(500, f"internal error: {type(e).__name__}")


# --------------------------------------------------------------------------------------------
# Request body limit, for every route (the JSON API, Gradio's queue and upload, Slack events)
# --------------------------------------------------------------------------------------------
class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets a 413 JSON error before any route
    reads it.

    A declared Content-Length is checked before anything is read (the HTTP parser refuses a body
    longer than it declares, so no counting is needed then). A chunked body declares nothing: it
    is read here up to the limit and handed on whole. After the 413 the rest of the refused body
    is read and dropped (bounded: DRAIN_*) before the connection closes: closing with unread data
    makes the kernel reset the connection, and a client still sending would never see the answer.
    """

    def __init__(self, app, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan; websockets carry no request body
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            message = f"the request body is {int(declared)} bytes; the limit is {self.limit}."
            await _refuse_body(receive, send, message)
            return
        if b"transfer-encoding" in headers:  # chunked: nothing declared, count it here
            body, more = bytearray(), True
            while more:
                event = await receive()
                if event["type"] != "http.request":
                    return  # the client went away
                body += event.get("body", b"")
                more = event.get("more_body", False)
                if len(body) > self.limit:
                    await _refuse_body(
                        receive, send, f"the request body is over the limit of {self.limit} bytes."
                    )
                    return
            receive = _replay(bytes(body), receive)
        await self.app(scope, receive, send)


def _replay(body: bytes, receive):
    """An ASGI `receive` that gives the buffered body once, then defers to the server's."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay():
        return pending.pop() if pending else await receive()

    return replay


async def _refuse_body(receive, send, message: str) -> None:
    payload = json.dumps(
        {"error": f"{message} Send the part of the log around the error.", "status": 413}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),  # never read what is left as a next request
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": True})
    # The whole answer is out (its length is declared); drop what the client is still sending.
    dropped, deadline = 0, time.monotonic() + DRAIN_MAX_S
    while dropped < DRAIN_MAX_BYTES:
        try:
            wait_s = min(DRAIN_IDLE_S, deadline - time.monotonic())
            event = await asyncio.wait_for(receive(), max(0.0, wait_s))
        except TimeoutError:
            break
        if event["type"] != "http.request":
            break
        dropped += len(event.get("body", b""))
        if not event.get("more_body", False):
            break
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Stream:
    """Run `kb.ask` in a thread and hand its `on_token` pieces to a generator as they come."""

    _DONE = object()

    def __init__(
        self, kb: KnowledgeBase, query: str, lang: str | None, history: list[tuple[str, str]]
    ) -> None:
        self.answer: Answer | None = None
        self.error: BaseException | None = None
        self._q: queue.Queue = queue.Queue()

        def work() -> None:
            try:
                self.answer = kb.ask(query, lang=lang, history=history, on_token=self._q.put)
            except BaseException as e:  # re-raised in the consumer's thread
                self.error = e
            finally:
                self._q.put(self._DONE)

        threading.Thread(target=work, name="kb-ask", daemon=True).start()

    def pieces(self) -> Iterator[str]:
        while (item := self._q.get()) is not self._DONE:
            yield item
        if self.error is not None:
            raise self.error


def _stats_line(live: LiveKb) -> str:
    s = live.get().stats()
    emb = s["embedder"].get("id", "?") if isinstance(s["embedder"], dict) else s["embedder"]
    llm = live.kb.settings.llm.model or "extractive"
    return (
        f"{s['entries']} entries / 条目 (zh {s['languages']['zh']}, en {s['languages']['en']}) · "
        f"embedder `{emb}` · answers: `{llm}` · built {s['built_at']} · "
        "API: `POST /api/ask`, `POST /api/search`, `GET /api/health`"
    )


def build_ui(live: LiveKb):
    import gradio as gr

    i18n = gr.I18n(**I18N)

    def respond(message: str, chat: list, history: list, lang_choice: str):
        from index.post import read_post

        if not message or not message.strip():
            yield gr.skip(), gr.skip(), gr.skip()
            return
        kb = live.get()
        lang = None if lang_choice == "auto" else lang_choice
        shown_lang = lang or read_post(message[:200_000]).lang
        shown_lang = shown_lang if shown_lang in UI else "en"
        chat = [
            *chat,
            {"role": "user", "content": render_user(message, shown_lang)},
            {"role": "assistant", "content": f"*{UI[shown_lang]['thinking']}*"},
        ]
        yield "", chat, history
        text, last = "", 0.0
        try:
            stream = _Stream(kb, message, lang, [tuple(t) for t in history])
            for piece in stream.pieces():
                text += piece
                if time.monotonic() - last >= STREAM_MIN_INTERVAL_S:
                    last = time.monotonic()
                    chat[-1] = {"role": "assistant", "content": escape_md_html(text) + " ▌"}
                    yield gr.skip(), chat, gr.skip()
            answer = stream.answer
            assert answer is not None
            chat[-1] = {"role": "assistant", "content": render_answer(answer)}
            history = [*history, ("user", message), ("assistant", answer.text)]
        except KbError as e:  # too large, empty, ...: the message says what to do
            chat[-1] = {"role": "assistant", "content": f"⚠ {escape_md_html(str(e))}"}
        except Exception as e:
            log.exception("kb serve: chat request failed")
            chat[-1] = {
                "role": "assistant",
                "content": "⚠ " + UI[shown_lang]["error"].format(kind=type(e).__name__),
            }
        yield "", chat, history

    with gr.Blocks(title="kb · distributed-training errors / 分布式训练报错") as demo:
        history = gr.State([])  # (role, raw text) per turn, for follow-ups
        gr.Markdown(f"## {i18n('title')}", elem_id="kb-title")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                chat = gr.Chatbot(
                    label=i18n("chat"),
                    show_label=False,
                    height="62vh",  # the answer, its commands and sources without much scrolling
                    min_height=420,
                    elem_id="kb-chat",
                    buttons=["copy"],
                    feedback_options=None,
                    sanitize_html=True,
                    line_breaks=True,
                )
                box = gr.Textbox(
                    label=i18n("paste"),
                    placeholder=i18n("placeholder"),
                    lines=5,
                    max_lines=14,
                    max_length=None,  # no cap: a 5,000-line log must fit (the server limit is bytes)
                    elem_id="kb-query",
                    autofocus=True,
                )
                with gr.Row():
                    lang = gr.Radio(
                        LANG_CHOICES, value="auto", label=i18n("lang"), scale=3, elem_id="kb-lang"
                    )
                    send = gr.Button(i18n("send"), variant="primary", scale=1, elem_id="kb-send")
                    clear = gr.Button(i18n("clear"), variant="secondary", scale=1, elem_id="kb-clear")
                examples = gr.Dataset(
                    components=[gr.Textbox(visible=False)],
                    samples=[[text] for _, text in EXAMPLES],
                    sample_labels=[label for label, _ in EXAMPLES],
                    label=i18n("examples"),
                    elem_id="kb-examples",
                )
            with gr.Column(scale=2, min_width=320, elem_id="kb-side"):
                gr.HTML(PANEL_HTML, elem_id="kb-panel", js_on_load=None)
        gr.Markdown(lambda: _stats_line(live), elem_id="kb-stats")

        io = {"inputs": [box, chat, history, lang], "outputs": [box, chat, history]}
        send.click(respond, **io, concurrency_limit=4)
        box.submit(respond, **io, concurrency_limit=4)
        examples.click(lambda sample: sample[0], examples, box, queue=False).then(
            respond, **io, concurrency_limit=4
        )
        clear.click(lambda: ("", [], []), None, [box, chat, history], queue=False)
    return demo, i18n


# --------------------------------------------------------------------------------------------
# App and server
# --------------------------------------------------------------------------------------------
def create_app(kb: KnowledgeBase, slack: bool = False, reload_every_s: float = RELOAD_CHECK_S):
    """FastAPI app: JSON API, optionally the Slack door, then the chat at `/` (mounted last:
    a mount at `/` answers every path, so routes added after it would never be reached)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from an offline tool
    _private_gradio_temp_dir()
    import gradio as gr
    from fastapi import FastAPI

    from .web_guard import RequestGuard, no_cross_origin

    live = LiveKb(kb, reload_every_s)
    app = FastAPI(title="kb", docs_url=None, redoc_url=None, openapi_url=None)
    _add_api(app, live)
    _no_uploads(app)
    if slack:
        _mount_slack(app, kb)
    demo, i18n = build_ui(live)
    gr.mount_gradio_app(
        app,
        demo,
        path="/",
        css=PAGE_CSS,
        head=PAGE_HEAD,
        i18n=i18n,
        # System fonts: the default themes fetch web fonts, which an offline install cannot reach.
        theme=gr.themes.Soft(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]),
        footer_links=["settings"],
        run_history=False,
        ssr_mode=False,
        show_error=False,
        # Uploads are turned off (_no_uploads); should a route of Gradio's still take a file, it
        # is capped at what a query may be, and lands in the private folder removed at exit.
        max_file_size=kb.settings.max_query_bytes,
    )
    _quiet_queue(demo)
    no_cross_origin(app)
    app.add_middleware(BodyLimit, limit=kb.settings.max_query_bytes + BODY_HEADROOM)
    app.add_middleware(RequestGuard)  # added last: runs first
    return app


# Gradio's queue looks for work every 1 ms and for progress every 10 ms, also when idle: an idle
# `kb serve` used ~7% of a core. Every 20 ms costs a chat request at most 20 ms before it starts
# (answers take 50-500 ms); the chat shows no progress bars.
QUEUE_IDLE_SLEEP_S = 0.02
QUEUE_PROGRESS_SLEEP_S = 0.25


def _quiet_queue(demo) -> None:
    queue = getattr(demo, "_queue", None)
    if queue is not None and hasattr(queue, "sleep_when_free"):
        queue.sleep_when_free = max(queue.sleep_when_free, QUEUE_IDLE_SLEEP_S)
        queue.progress_update_sleep_when_free = max(
            getattr(queue, "progress_update_sleep_when_free", 0.0), QUEUE_PROGRESS_SLEEP_S
        )


def _no_uploads(app) -> None:
    """The chat takes no files, but Gradio's upload route is always there: anyone could store files
    in its temp folder (20 x 2 MB took 0.7 s, kept after the server stopped). Routes of the parent
    app come before the mounted chat, so these answer instead."""

    @app.api_route("/gradio_api/upload", methods=["GET", "POST", "PUT", "HEAD", "OPTIONS"])
    @app.api_route("/gradio_api/upload_progress", methods=["GET", "HEAD"])
    def no_upload():
        return _error(404, "this server takes no file uploads: paste the log's text into the chat")


def _private_gradio_temp_dir() -> None:
    """Gradio's files go to a folder of this process, removed when it exits, instead of the
    shared /tmp/gradio that outlives every server (unless GRADIO_TEMP_DIR is set by the user)."""
    if os.environ.get("GRADIO_TEMP_DIR"):
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="kb-gradio-")
    os.environ["GRADIO_TEMP_DIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


def _mount_slack(app, kb: KnowledgeBase) -> None:
    try:
        from . import slack as slack_door
    except ModuleNotFoundError as e:
        if e.name == "kb.slack":
            raise KbError("--slack: the Slack door (kb/slack.py) is not part of this installation") from e
        raise KbError(f"--slack needs the package {e.name!r}: pip install 'bilingual-kb[slack]'") from e
    if not hasattr(slack_door, "mount"):
        raise KbError("--slack: kb/slack.py has no mount(app, kb); update the installation")
    slack_door.mount(app, kb)


def _check_port(host: str, port: int) -> None:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise KbError(
                f"cannot listen on {host}:{port} ({e.strerror}); pick another port with --port"
            ) from e


def launch(app, host: str = "127.0.0.1", port: int = 7860) -> None:
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"kb serve: listening on {host}: the chat and API are reachable from the network, without authentication",
            file=sys.stderr,
        )
    print(
        f"kb serve: http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/  "
        "(API: POST /api/ask, POST /api/search, GET /api/health)",
        file=sys.stderr,
        flush=True,
    )
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler it found:
    # exiting through SystemExit (not the default handler's instant death) runs the atexit
    # clean-up, e.g. of Gradio's private temp folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


class SecretMask(logging.Formatter):
    """Formats log lines with the given secret values replaced, tracebacks included (an error
    message may quote a request's headers)."""

    def __init__(self, fmt: str, secrets: list[str]) -> None:
        super().__init__(fmt)
        # Longest first, so a secret that contains another is masked whole.
        self.secrets = sorted(set(secrets), key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        from .config import redact_urls

        text = super().format(record)
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return redact_urls(text)  # user:password@ in any URL (KB_LLM_BASE_URL), ?api_key=...


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.I)  # OPENAI_API_KEY, SLACK_BOT_TOKEN, ...


def configure_logging(key_env: str = "") -> None:
    """The server's log on stderr: kb.* at INFO (LLM failures and fallbacks, index reloads, chat
    errors), libraries at WARNING (httpx would log every request to the model at INFO). The values
    of `key_env` and of every variable named like a secret are masked in every line."""
    names = {n for n in os.environ if _SECRET_NAME.search(n)} | ({key_env} if key_env else set())
    secrets = [v for n in names if len(v := os.environ.get(n, "").strip()) >= 8]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SecretMask("%(asctime)s %(levelname)s %(name)s: %(message)s", secrets))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])  # no-op if the host set one up
    logging.getLogger("kb").setLevel(logging.INFO)


def serve_command(args) -> int:
    """`kb serve`: open the knowledge base once, build the app, serve until interrupted."""
    from .progress import ProgressBar

    _check_port(args.host, args.port)  # fail before the slow part when the port is taken
    kb = KnowledgeBase.open(index=args.index, progress=ProgressBar())
    configure_logging(kb.settings.llm.api_key_env)
    app = create_app(kb, slack=args.slack)
    launch(app, args.host, args.port)
    return 0
