"""The web door: one server with the Gradio chat at `/` and a JSON API under `/api/`.

    POST /api/search   {"query": str, "k"?: int, "lang"?: "zh"|"en"|null}       -> schema.search_json
    POST /api/ask      {"query": str, "lang"?: ..., "history"?: [{"role", "content"}]} -> schema.ask_json
    GET  /api/health   index stats (entries per language, embedder, build time)
    GET  /api/entry/ID schema.entry_json (the entry and its other-language version)
    GET  /entry/ID     the entry as HTML (`?fragment=1`: the piece the chat's side panel shows)

One KnowledgeBase is opened at start and shared read-only by every request; a rebuilt index is
picked up in the background (`LiveKb`). The page holds no retrieval logic: it calls `kb.ask`
and only renders the Answer. gradio / fastapi / uvicorn are imported inside the functions.
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoints' annotations
# (`request: Request`) at runtime, and Request is imported inside the function that adds them.
import html
import json
import logging
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from .answer import CAUTION, LABELS, Answer, entry_in, is_destructive
from .service import KbError, KnowledgeBase, QueryError

log = logging.getLogger("kb.web")

RELOAD_CHECK_S = 5.0  # how often (at most) a request looks for a rebuilt index
BODY_HEADROOM = 64 * 1024  # JSON envelope + history on top of settings.max_query_bytes
MAX_HISTORY_TURNS = 50
MAX_K = 50
LOG_PREVIEW_LINES = 8  # a pasted log is shown in the chat by its last lines (all of it is searched)
BIG_PASTE_CHARS = 20_000  # pastes above this skip the browser's slow editing path (see PAGE_HEAD)
STREAM_MIN_INTERVAL_S = 0.05  # do not push more than ~20 partial updates a second to the browser


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


async def _read_json(request, limit: int) -> dict:
    """The request body as a JSON object, refusing more than `limit` bytes before reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "invalid Content-Length header")
        if int(declared) > limit:
            raise ApiError(
                413,
                f"the request body is {declared} bytes; the limit is {limit}. Send the part of the log around the error.",
            )
    chunks, size = [], 0
    async for chunk in request.stream():  # also bounds chunked uploads, which declare no length
        size += len(chunk)
        if size > limit:
            raise ApiError(
                413,
                f"the request body is over the limit of {limit} bytes. Send the part of the log around the error.",
            )
        chunks.append(chunk)
    raw = b"".join(chunks)
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


def _error(status: int, message: str):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": message, "status": status}, status_code=status)


def _add_api(app, live: LiveKb) -> None:
    from fastapi import Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.concurrency import run_in_threadpool

    from .schema import ask_json, entry_json, search_json

    settings = live.kb.settings
    body_limit = settings.max_query_bytes + BODY_HEADROOM

    @app.exception_handler(ApiError)
    async def _api_error(_request, e: ApiError):
        return _error(e.status, e.message)

    @app.exception_handler(QueryError)
    async def _query_error(_request, e: QueryError):  # empty query etc.: the user can fix it
        return _error(422, str(e))

    @app.post("/api/search")
    async def api_search(request: Request):
        body = await _read_json(request, body_limit)
        query, k, lang = _query(body, settings.max_query_bytes), _k(body), _lang(body)
        result = await run_in_threadpool(live.get().search, query, k, lang)  # CPU work off the event loop
        return JSONResponse(search_json(result))

    @app.post("/api/ask")
    async def api_ask(request: Request):
        body = await _read_json(request, body_limit)
        query, lang, history = _query(body, settings.max_query_bytes), _lang(body), _history(body)
        answer = await run_in_threadpool(lambda: live.get().ask(query, lang=lang, history=history))
        return JSONResponse(ask_json(answer))

    @app.get("/api/health")
    def api_health():
        kb = live.get()
        return {"status": "ok", **kb.stats(), "llm": kb.settings.llm.model or None}

    @app.get("/api/entry/{entry_id}")
    def api_entry(entry_id: str):
        kb = live.get()
        e = kb.entry(entry_id)
        if e is None:
            raise ApiError(404, f"no entry {entry_id!r} in the index")
        return JSONResponse(entry_json(e, kb.entry(e.translation) if e.translation else None))

    @app.get("/entry/{entry_id}", response_class=HTMLResponse)
    def entry_page(entry_id: str, fragment: str = ""):
        fragment = fragment not in ("", "0")
        kb = live.get()
        e = kb.entry(entry_id)
        if e is None:
            body = f"<p>No entry <code>{html.escape(entry_id)}</code> in the index.</p>"
            return HTMLResponse(body if fragment else _page("404", body), status_code=404)
        piece = entry_html(kb, e)
        return HTMLResponse(piece if fragment else _page(e.title, piece))

    # Anything else under /api/ answers JSON too (the chat, mounted at /, would answer HTML).
    known = {"/api/search": "POST", "/api/ask": "POST", "/api/health": "GET"}

    @app.api_route("/api/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    def api_other(rest: str, request: Request):
        path = "/api/" + rest
        allowed = known.get(path) or ("GET" if re.fullmatch(r"/api/entry/[^/]+", path) else None)
        if allowed and request.method != allowed:
            resp = _error(405, f"{path} takes {allowed}, not {request.method}")
            resp.headers["Allow"] = allowed
            return resp
        return _error(404, f"no API endpoint {path}; see /api/health, POST /api/search, POST /api/ask")

    @app.exception_handler(Exception)
    async def _unexpected(_request, e: Exception):  # a bug: JSON for the client, traceback in the log
        return _error(500, f"internal error: {type(e).__name__}")


# --------------------------------------------------------------------------------------------
# Entry rendering (side panel and /entry pages): FAQ markdown with raw HTML shown as text
# --------------------------------------------------------------------------------------------
def _markdown(text: str) -> str:
    from markdown_it import MarkdownIt

    # html=False: a <script> (or any tag) in a FAQ is escaped and shown as text, never run.
    # markdown-it also refuses javascript:/vbscript:/data: link targets.
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def _source_label(e) -> str:
    return f"{e.doc}:{e.start_line}-{e.end_line}"


def entry_html(kb: KnowledgeBase, e) -> str:
    """One entry: title, source path and lines, full body, and its other-language version."""
    esc = html.escape
    base = kb.settings.docs_base_url
    src = f"<code>{esc(_source_label(e))}</code>"
    if base:
        src = f'<a href="{esc(base.rstrip("/") + "/" + e.doc)}" target="_blank" rel="noopener">{src}</a>'
    parts = [
        f'<article class="kb-entry" data-entry-id="{esc(e.id)}" lang="{esc(e.lang)}">',
        f'<div class="kb-entry-meta"><span class="kb-lang">{esc(e.lang.upper())}</span> {src}</div>',
        f'<h3 class="kb-entry-title">{esc(e.title)}</h3>',
        f'<div class="kb-entry-body">{_markdown(e.body)}</div>',
    ]
    other = kb.entry(e.translation) if e.translation else None
    if other is not None:
        label = LABELS.get(e.lang, LABELS["en"])["other_lang"]
        parts += [
            f'<details class="kb-translation" open><summary>{esc(label)} · <code>{esc(_source_label(other))}</code></summary>',
            f'<h4 lang="{esc(other.lang)}">{esc(other.title)}</h4>',
            f'<div class="kb-entry-body" lang="{esc(other.lang)}">{_markdown(other.body)}</div></details>',
        ]
    parts.append("</article>")
    return "\n".join(parts)


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
        f"<title>{html.escape(title)}</title><style>{PANEL_CSS}body{{max-width:52rem;margin:2rem auto;"
        f"padding:0 1rem;font-family:system-ui,sans-serif}}</style></head><body>{body}</body></html>"
    )


# --------------------------------------------------------------------------------------------
# Chat rendering: Answer -> markdown for the Chatbot
# --------------------------------------------------------------------------------------------
UI = {
    "en": {
        "thinking": "Searching the knowledge base…",
        "log_shown": "{n}-line log (the last {k} lines shown; all of it was searched)",
        "no_match_title": "No match",
        "error": "Something went wrong on the server ({kind}). Try again; if it persists, check the server log.",
    },
    "zh": {
        "thinking": "正在检索知识库…",
        "log_shown": "{n} 行日志（仅显示最后 {k} 行；已检索全部内容）",
        "no_match_title": "没有匹配",
        "error": "服务器出错（{kind}）。请重试；如果仍然出错，请查看服务器日志。",
    },
}

_FENCE = re.compile(r"(?ms)^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1", re.S)


def escape_md_html(text: str) -> str:
    """Show `<` and `>` in prose as text (the chat renders markdown), leaving code untouched."""

    def prose(s: str) -> str:
        out, pos = [], 0
        for m in _CODE_SPAN.finditer(s):
            out.append(s[pos : m.start()].replace("<", "&lt;").replace(">", "&gt;"))
            out.append(m.group(0))
            pos = m.end()
        out.append(s[pos:].replace("<", "&lt;").replace(">", "&gt;"))
        return "".join(out)

    out, pos = [], 0
    for m in _FENCE.finditer(text):
        out.append(prose(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(prose(text[pos:]))
    return "".join(out)


def _link_text(s: str) -> str:
    return escape_md_html(s).replace("[", "\\[").replace("]", "\\]")


def entry_link(e, label: str | None = None) -> str:
    # Relative, so it also works when the app is served under a prefix; the page's script opens
    # it in the side panel, and without the script it is an ordinary page.
    return f"[{_link_text(label if label is not None else e.title)}](entry/{e.id})"


def code_block(command: str, info: str = "bash") -> str:
    longest = max((len(m) for m in re.findall(r"`+", command)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{command}\n{fence}"


def link_citations(text: str, answer: Answer) -> str:
    """`[n]` in the answer text -> a link that opens cited entry n."""
    by_n = {c.n: c.entry for c in answer.citations}

    def sub(m: re.Match) -> str:
        e = by_n.get(int(m.group(1)))
        return f"[\\[{m.group(1)}\\]](entry/{e.id})" if e is not None else m.group(0)

    return re.sub(r"(?<![\[\\])\[(\d{1,2})\](?![\(\[])", sub, text)


def _in_fence(command: str, text: str) -> bool:
    return any(command.strip() in m.group(0) for m in _FENCE.finditer(text))


def _label_destructive_fences(md: str, lang: str) -> str:
    """A code block inside the answer text that holds a destructive command gets the caution too."""

    def sub(m: re.Match) -> str:
        lines = m.group(0).split("\n")[1:-1]
        return f"> ⚠ **{CAUTION[lang]}**\n\n{m.group(0)}" if any(map(is_destructive, lines)) else m.group(0)

    return _FENCE.sub(sub, md)


def render_answer(answer: Answer) -> str:
    lang = answer.lang if answer.lang in LABELS else "en"
    labels, ui = LABELS[lang], UI[lang]
    out: list[str] = []
    if answer.notice:
        out.append(f"> ℹ {escape_md_html(answer.notice)}")
    if answer.no_match:
        out.append(f"**{ui['no_match_title']}** · {escape_md_html(answer.text)}")
        if answer.suggestions:
            out.append(labels["suggest"])
            out.append(
                "\n".join(
                    f"- {entry_link(entry_in(h, lang))} · `{_source_label(entry_in(h, lang))}`"
                    for h in answer.suggestions
                )
            )
        return "\n\n".join(out)
    out.append(_label_destructive_fences(link_citations(escape_md_html(answer.text), answer), lang))
    commands = answer.commands
    if answer.mode == "llm":  # the model's answer shows its (verified) commands in code blocks
        commands = tuple(c for c in commands if not _in_fence(c, answer.text))
    if commands:
        out.append(f"**{labels['commands']}**")
        for cmd in commands:
            if is_destructive(cmd):
                out.append(f"> ⚠ **{CAUTION[lang]}**")
            out.append(code_block(cmd))
    if answer.citations:
        out.append(f"**{labels['sources']}**")
        out.append(
            "\n".join(
                f"- {entry_link(c.entry, f'[{c.n}] {c.entry.title}')} · `{_source_label(c.entry)}`"
                for c in answer.citations
            )
        )
    return "\n\n".join(out)


def render_user(message: str, lang: str) -> str:
    """A pasted log is shown by its last lines (where the error usually is); a question as text."""
    lines = message.rstrip("\n").split("\n")
    if len(lines) <= LOG_PREVIEW_LINES:
        return code_block(message.rstrip("\n"), "text") if len(lines) > 1 else escape_md_html(message)
    note = UI[lang]["log_shown"].format(n=len(lines), k=LOG_PREVIEW_LINES)
    return f"*{note}*\n\n" + code_block("\n".join(lines[-LOG_PREVIEW_LINES:]), "text")


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


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------
EXAMPLES = [
    ("NCCL error(2)", "ExternalError: Nccl error(2), unhandled system error"),
    ("HCCL 1343225860", "Init plugin so failed, ret = 1343225860"),
    ("多机训练 NCCL 超时", "多机多卡训练时 NCCL 通信超时，报错 NCCL timeout，怎么排查？"),
    ("accelerate hang", "accelerate launch with 2 GPUs hangs at the first step, no error message"),
    ("Paddle 分布式启动失败", "paddle.distributed.launch 启动多卡训练失败，怎么设置环境变量？"),
]

LANG_CHOICES = [("Auto · 跟随提问", "auto"), ("中文", "zh"), ("English", "en")]

I18N = {
    "en": {
        "title": "Distributed-training error helper",
        "paste": "Paste the error or the whole log (Enter sends, Shift+Enter adds a line)",
        "placeholder": "e.g. ExternalError: Nccl error(2), unhandled system error — or paste 5,000 lines of log",
        "send": "Send",
        "clear": "Clear",
        "lang": "Answer language · 回答语言",
        "examples": "Example errors (click to ask)",
        "chat": "Answers",
    },
    "zh": {
        "title": "分布式训练报错助手",
        "paste": "粘贴报错或整段日志（Enter 发送，Shift+Enter 换行）",
        "placeholder": "例如 ExternalError: Nccl error(2), unhandled system error —— 也可以粘贴 5000 行日志",
        "send": "发送",
        "clear": "清空",
        "lang": "回答语言 · Answer language",
        "examples": "示例报错（点击即可提问）",
        "chat": "回答",
    },
}

PANEL_PLACEHOLDER = (
    '<div id="kb-entry" class="kb-panel-empty">'
    "<p>Click a citation such as [1] in an answer to read the cited FAQ entry here.</p>"
    "<p>点击回答中的引用（如 [1]），在这里查看原文条目。</p></div>"
)
PANEL_HTML = '<div class="kb-panel-head">Source entry · 原文条目</div>' + PANEL_PLACEHOLDER

PANEL_CSS = """
.kb-entry-meta{font-size:.85em;opacity:.8;margin-bottom:.25rem}
.kb-lang{display:inline-block;padding:0 .4em;border-radius:.3em;background:#e0e7ff;color:#3730a3;font-weight:600}
.kb-entry-title{margin:.2rem 0 .6rem 0}
.kb-entry-body pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.6em;border-radius:.4em;font-size:.85em}
.kb-entry-body code{word-break:break-word}
.kb-translation{margin-top:1rem;border-top:1px solid #ddd;padding-top:.6rem}
.kb-translation summary{cursor:pointer;font-weight:600}
"""

PAGE_CSS = (
    PANEL_CSS
    + """
#kb-side{position:sticky;top:.5rem;align-self:flex-start}
#kb-panel{max-height:88vh;overflow:auto;padding:.8rem 1rem;border:1px solid var(--border-color-primary);
  border-radius:var(--radius-lg);background:var(--background-fill-primary)}
.kb-panel-empty{opacity:.75}
.kb-panel-head{font-size:.8em;font-weight:600;text-transform:uppercase;letter-spacing:.04em;opacity:.6;
  margin-bottom:.5rem}
#kb-chat .user-row pre, #kb-chat .user-row pre code{white-space:pre-wrap;word-break:break-all}
#kb-query textarea{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em}
#kb-stats{font-size:.8em;opacity:.7}
.kb-flash{animation:kbflash 1s ease-out}
@keyframes kbflash{from{background:#fef9c3}to{background:transparent}}
"""
)

# Document-level script (the `head` hook): citation links open the side panel; Enter sends and
# Shift+Enter adds a line (Gradio's multi-line box does the reverse, so we take the key first).
PAGE_HEAD = """
<script>
(() => {
  const ENTRY = /\\/entry\\/([A-Za-z0-9_-]+)\\/?$/;
  function entryUrl(a) {
    try {
      const u = new URL(a.getAttribute('href'), document.baseURI);
      return u.origin === location.origin && ENTRY.test(u.pathname) ? u : null;
    } catch (e) { return null; }
  }
  async function openEntry(u) {
    const panel = document.getElementById('kb-entry');
    if (!panel) { window.open(u.href, '_blank'); return; }
    panel.classList.remove('kb-panel-empty');
    panel.setAttribute('aria-busy', 'true');
    try {
      const r = await fetch(u.pathname + '?fragment=1', {headers: {Accept: 'text/html'}});
      panel.innerHTML = await r.text();  // rendered on the server with FAQ HTML escaped
    } catch (e) {
      panel.textContent = 'Could not load the entry / 无法加载条目: ' + e;
    }
    panel.removeAttribute('aria-busy');
    const box = document.getElementById('kb-panel');
    if (box) { box.scrollTop = 0; box.classList.remove('kb-flash'); void box.offsetWidth; box.classList.add('kb-flash'); }
  }
  document.addEventListener('click', (ev) => {
    const t = ev.target;
    if (!(t instanceof Element)) return;
    const a = t.closest('a[href]');
    const u = a && entryUrl(a);
    if (u && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey && ev.button === 0) {
      ev.preventDefault(); ev.stopPropagation();
      openEntry(u);
      return;
    }
    if (t.closest('#kb-clear')) {
      const panel = document.getElementById('kb-entry');
      if (panel) { panel.outerHTML = %PLACEHOLDER%; }
    }
  }, true);
  // Gradio's box submits on Shift+Enter in its keypress handler: keep both key events from it.
  const onEnter = (ev) => {
    if (ev.key !== 'Enter' || ev.isComposing || ev.keyCode === 229) return;  // IME confirmation
    const t = ev.target;
    if (!(t instanceof Element) || !t.closest('#kb-query')) return;
    ev.stopPropagation();
    if (ev.shiftKey || ev.type !== 'keydown') return;  // Shift+Enter: the browser adds the newline
    ev.preventDefault();
    const send = document.querySelector('#kb-send');
    if (send) send.click();
  };
  document.addEventListener('keydown', onEnter, true);
  document.addEventListener('keypress', onEnter, true);
  // A big paste goes straight into the box: the browser's editing path takes seconds for a
  // few thousand lines (superlinear), setting the value takes milliseconds.
  document.addEventListener('paste', (ev) => {
    const t = ev.target;
    if (!(t instanceof HTMLTextAreaElement) || !t.closest('#kb-query')) return;
    const text = ev.clipboardData ? ev.clipboardData.getData('text/plain') : '';
    if (text.length < %BIG_PASTE%) return;
    ev.preventDefault();
    const start = t.selectionStart, end = t.selectionEnd;
    t.value = t.value.slice(0, start) + text + t.value.slice(end);
    t.selectionStart = t.selectionEnd = start + text.length;
    t.dispatchEvent(new Event('input', {bubbles: true}));  // Gradio reads the value on input
  }, true);
})();
</script>
""".replace("%PLACEHOLDER%", json.dumps(PANEL_PLACEHOLDER)).replace("%BIG_PASTE%", str(BIG_PASTE_CHARS))


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
        from index.text import query_lang

        if not message or not message.strip():
            yield gr.skip(), gr.skip(), gr.skip()
            return
        kb = live.get()
        lang = None if lang_choice == "auto" else lang_choice
        shown_lang = lang or query_lang(message)
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
    import gradio as gr
    from fastapi import FastAPI

    live = LiveKb(kb, reload_every_s)
    app = FastAPI(title="kb", docs_url=None, redoc_url=None, openapi_url=None)
    _add_api(app, live)
    if slack:
        _mount_slack(app, kb)
    demo, i18n = build_ui(live)
    return gr.mount_gradio_app(
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
    )


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
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def serve_command(args) -> int:
    """`kb serve`: open the knowledge base once, build the app, serve until interrupted."""
    from .progress import ProgressBar

    _check_port(args.host, args.port)  # fail before the slow part when the port is taken
    kb = KnowledgeBase.open(index=args.index, progress=ProgressBar())
    app = create_app(kb, slack=args.slack)
    launch(app, args.host, args.port)
    return 0
