"""The web chat (Gradio, mounted at `/` of `kb serve`): it calls `kb.ask` through turns.py and
shows the Answer as render.py formats it; it holds no retrieval or answer logic of its own.

The page: a header (title, About, New chat), the conversation with a welcome and example chips
when empty, the box pinned under it with the answer language, Send and Stop, and the source
panel (a column beside the chat, a sheet from the bottom on a phone). The conversation is kept in
the browser (reloads keep it); a new chat forgets all of it, with an Undo.

gradio is imported inside the functions (`kb --help` stays fast).
"""

from __future__ import annotations

import logging
import os
from functools import partial

from ..host.live import LiveKb
from . import turns
from .assets import HEADER_HTML, I18N, LANG_CHOICES, PAGE_CSS, PANEL_HTML, TITLE
from .page_script import page_head
from .render import UI
from .welcome import examples_for, welcome_for

log = logging.getLogger("kb.web")

CONCURRENT_ANSWERS = 4  # chat answers computed at once (KnowledgeBase is safe for it)


def _conversation(i18n, feedback: bool, kb):
    import gradio as gr

    return gr.Chatbot(
        label=i18n("chat"),
        show_label=False,
        height="calc(100dvh - 300px)",  # the box stays in view under it (assets.py adjusts for phones)
        min_height=280,
        elem_id="kb-chat",
        buttons=["copy"],
        feedback_options=("Like", "Dislike") if feedback else None,  # kb/doors/web/feedback.py
        sanitize_html=True,
        line_breaks=True,
        autoscroll=False,  # the page's script scrolls a new answer to its start, not to its end
        placeholder=welcome_for(kb),  # the bundled KB's, or what this index holds (welcome.py)
        examples=[{"text": text, "display_text": label} for label, text in examples_for(kb)],
    )


def _inputs(i18n):
    """The box pinned under the conversation, the language choice, Send/Stop, the hint line."""
    import gradio as gr

    box = gr.Textbox(
        label=i18n("paste"),
        show_label=False,
        placeholder=i18n("placeholder"),
        lines=3,
        max_lines=10,
        max_length=None,  # no cap: a 20 MB log is accepted (page_script.py and turns.fit_paste)
        elem_id="kb-query",
        autofocus=True,
    )
    with gr.Row(elem_id="kb-controls"):
        lang = gr.Radio(
            LANG_CHOICES, value="auto", label=i18n("lang"), show_label=False, scale=3, elem_id="kb-lang"
        )
        send = gr.Button(i18n("send"), variant="primary", scale=1, elem_id="kb-send")
        stop = gr.Button(i18n("stop"), variant="stop", scale=1, elem_id="kb-stop", visible=False)
    hint = gr.HTML('<p id="kb-hint-text" aria-live="polite"></p>', elem_id="kb-hint", padding=False)
    return box, lang, send, stop, hint


def build_ui(live: LiveKb, secret: str | None = None):
    import gradio as gr

    from ...feedback import open_store
    from .feedback import add_chat_feedback, remember

    i18n = gr.I18n(**I18N)
    store = open_store(live.kb.settings)
    with gr.Blocks(title=TITLE) as demo:
        history = gr.State([])  # [role, text] per turn, for follow-ups
        cleared = gr.State({})  # the conversation a New chat put aside, for Undo
        rated = gr.State({})  # what each answer showed, for its vote (kb/doors/web/feedback.py)
        saved = gr.BrowserState({"chat": [], "history": []}, storage_key="kb-chat", secret=secret)
        with gr.Row(elem_id="kb-top"):
            gr.HTML(HEADER_HTML, padding=False, scale=5)
            new = gr.Button(i18n("new_chat"), size="sm", scale=0, min_width=110, elem_id="kb-new")
        undo = gr.Button(i18n("undo"), size="sm", visible=False, elem_id="kb-undo")
        with gr.Row(equal_height=False, elem_id="kb-main"):
            with gr.Column(scale=3, min_width=360):
                chat = _conversation(i18n, feedback=store is not None, kb=live.kb)
                box, lang, send, stop, _hint = _inputs(i18n)
                if store is not None:
                    add_chat_feedback(live, store, chat, rated)
            with gr.Column(scale=2, min_width=320, elem_id="kb-side"):
                gr.HTML(PANEL_HTML, elem_id="kb-panel", padding=False)
        # on_answer(rated, index, query, answer): what each answer showed, for its vote
        on_answer = None if store is None else partial(remember, live, store)
        _wire(live, demo, chat, box, lang, send, stop, new, undo, history, cleared, saved, rated, on_answer)
    return demo, i18n


def _wire(
    live, demo, chat, box, lang, send, stop, new, undo, history, cleared, saved, rated, on_answer
) -> None:
    """The events: ask (Send, Enter, an example chip), Stop, the same answer again (language
    switch, regenerate), New chat and Undo, and the conversation restored on load."""
    import gradio as gr

    outputs = [box, chat, history, saved, send, stop, undo]
    ask = {
        "inputs": [box, chat, history, lang, rated],
        "outputs": outputs,
        "concurrency_limit": CONCURRENT_ANSWERS,
    }

    def hook(rated_v):
        return None if on_answer is None else partial(on_answer, rated_v)

    def respond(message, chat_v, history_v, lang_v, rated_v):
        yield from turns.respond(live, message, chat_v, history_v, lang_v, hook(rated_v))

    def again(chat_v, history_v, lang_v, rated_v):
        yield from turns.again(live, chat_v, history_v, lang_v, hook(rated_v))

    def example(evt):
        return evt.value["text"] if isinstance(evt.value, dict) else str(evt.value)

    # Gradio passes the chip's data by this annotation; under `from __future__ import annotations`
    # it would be the string "gr.SelectData", which Gradio cannot resolve (gr is imported here).
    example.__annotations__ = {"evt": gr.SelectData}

    asking = [
        send.click(respond, **ask),
        box.submit(respond, **ask),
        chat.example_select(example, None, box, queue=False).then(respond, **ask),
    ]
    redo = {
        "inputs": [chat, history, lang, rated],
        "outputs": outputs,
        "concurrency_limit": CONCURRENT_ANSWERS,
    }
    asking += [lang.change(again, **redo), chat.retry(again, **redo)]
    stop.click(turns.stopped, chat, outputs, cancels=asking, queue=False)
    new.click(turns.new_chat, [chat, history], [*outputs, cleared], queue=False)
    chat.clear(turns.new_chat, [chat, history], [*outputs, cleared], queue=False)
    undo.click(turns.undo_new_chat, cleared, outputs, queue=False)
    demo.load(turns.restore, saved, [chat, history], queue=False)


def _browser_secret(live: LiveKb) -> str | None:
    """The key the conversation is kept in the browser with, the same across restarts (a new
    key would make every kept conversation unreadable); None: a key for this run only."""
    import secrets

    from ...config import home_dir

    path = home_dir(live.kb.settings) / "chat-secret"
    try:
        if path.exists():
            return path.read_text().strip() or None
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        return path.read_text().strip()
    except OSError:
        return None


def mount_chat(app, live: LiveKb) -> None:
    """The chat at `/` of `app`: mounted last by the host, since a mount at `/` answers every
    path and routes added after it would never be reached."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from an offline tool
    _private_gradio_temp_dir()
    import gradio as gr

    _no_uploads(app)
    demo, i18n = build_ui(live, _browser_secret(live))
    gr.mount_gradio_app(
        app,
        demo,
        path="/",
        css=PAGE_CSS,
        head=page_head(UI["en"]["busy"] + " · " + UI["zh"]["busy"]),
        i18n=i18n,
        # System fonts: the default themes fetch web fonts, which an offline install cannot reach.
        theme=gr.themes.Soft(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]),
        footer_links=[],  # Gradio's settings and API pages are for developers; About has what they need
        run_history=False,
        ssr_mode=False,
        show_error=False,
        # Uploads are turned off (_no_uploads); should a route of Gradio's still take a file, it
        # is capped at what a query may be, and lands in the private folder removed at exit.
        max_file_size=live.kb.settings.max_query_bytes,
    )
    _quiet_queue(demo)


# Gradio's queue looks for work every 1 ms and for progress every 10 ms, also when idle: an idle
# `kb serve` used ~7% of a core. Each wake-up of the event loop costs Python time, so an idle
# server's CPU follows how often the loop wakes. Measured at stop 59, 30 s idle each time: work
# every 20 ms and progress every 250 ms (about 65 wake-ups a second with uvicorn's 10) used 2.0%
# of a core, over the 2.5% of tests/test_security_web.py in some 6 s windows; work every 50 ms,
# 1.9%; every 100 ms, as here, 1.3%; both every second, 1.0%. 100 ms costs a chat request at
# most 100 ms before it starts (answers take 50-500 ms). The chat shows no progress bars, so
# progress is looked for once a second.
QUEUE_IDLE_SLEEP_S = 0.1
QUEUE_PROGRESS_SLEEP_S = 1.0


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
        from .api import _error

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
