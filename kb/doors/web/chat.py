"""The web chat (Gradio, mounted at `/` of `kb serve`): it calls `kb.ask` and shows the Answer
as kb/doors/web/render.py formats it; it holds no retrieval or answer logic of its own.

gradio is imported inside the functions (`kb --help` stays fast).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from functools import partial

from ...answer import Answer
from ...errors import KbError
from ...present import reader_language
from ...service import KnowledgeBase
from ..host.live import LiveKb
from .assets import EXAMPLES, I18N, LANG_CHOICES, PAGE_CSS, PAGE_HEAD, PANEL_HTML
from .render import UI, escape_md_html, render_answer, render_user

log = logging.getLogger("kb.web")

STREAM_MIN_INTERVAL_S = 0.05  # do not push more than ~20 partial updates a second to the browser
CONCURRENT_ANSWERS = 4  # chat answers computed at once (KnowledgeBase is safe for it)


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


def _respond(live: LiveKb, message: str, chat: list, history: list, lang_choice: str, on_answer=None):
    """One chat turn: the question at once, the answer as it streams, then the final answer.
    on_answer(index, question, answer or None) is told what the answer at chat[index] showed
    (the feedback form needs it: kb/doors/web/feedback.py)."""
    import gradio as gr

    if not message or not message.strip():
        yield gr.skip(), gr.skip(), gr.skip()
        return
    kb = live.get()
    lang = None if lang_choice == "auto" else lang_choice
    shown_lang = reader_language(message, lang)
    chat = [
        *chat,
        {"role": "user", "content": render_user(message, shown_lang)},
        {"role": "assistant", "content": f"*{UI[shown_lang]['thinking']}*"},
    ]
    yield "", chat, history
    if on_answer is not None:
        on_answer(len(chat) - 1, message, None)  # nothing to rate there until the answer stands
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
        chat[-1] = {
            "role": "assistant",
            "content": render_answer(answer, kb.settings.docs_base_url, kb.entry),
        }
        history = [*history, ("user", message), ("assistant", answer.text)]
        if on_answer is not None:
            on_answer(len(chat) - 1, message, answer)
    except KbError as e:  # too large, empty, ...: the message says what to do
        chat[-1] = {"role": "assistant", "content": f"⚠ {escape_md_html(str(e))}"}
    except Exception as e:
        log.exception("kb serve: chat request failed")
        chat[-1] = {
            "role": "assistant",
            "content": "⚠ " + UI[shown_lang]["error"].format(kind=type(e).__name__),
        }
    yield "", chat, history


def _inputs(i18n, feedback: bool = False):
    """The chat column: the answers, the paste box, the language choice, the buttons, the examples."""
    import gradio as gr

    chat = gr.Chatbot(
        label=i18n("chat"),
        show_label=False,
        height="62vh",  # the answer, its commands and sources without much scrolling
        min_height=420,
        elem_id="kb-chat",
        buttons=["copy"],
        feedback_options=("Like", "Dislike") if feedback else None,  # kb/doors/web/feedback.py
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
        lang = gr.Radio(LANG_CHOICES, value="auto", label=i18n("lang"), scale=3, elem_id="kb-lang")
        send = gr.Button(i18n("send"), variant="primary", scale=1, elem_id="kb-send")
        clear = gr.Button(i18n("clear"), variant="secondary", scale=1, elem_id="kb-clear")
    examples = gr.Dataset(
        components=[gr.Textbox(visible=False)],
        samples=[[text] for _, text in EXAMPLES],
        sample_labels=[label for label, _ in EXAMPLES],
        label=i18n("examples"),
        elem_id="kb-examples",
    )
    return chat, box, lang, send, clear, examples


def build_ui(live: LiveKb):
    import gradio as gr

    from ...feedback import open_store
    from .feedback import add_chat_feedback, remember

    i18n = gr.I18n(**I18N)
    store = open_store(live.kb.settings)

    def respond(message: str, chat: list, history: list, lang_choice: str, turns: dict):
        on_answer = None if store is None else partial(remember, live, store, turns)
        yield from _respond(live, message, chat, history, lang_choice, on_answer)

    with gr.Blocks(title="kb · distributed-training errors / 分布式训练报错") as demo:
        history = gr.State([])  # (role, raw text) per turn, for follow-ups
        turns = gr.State({})  # what each answer showed, for its vote (kb/doors/web/feedback.py)
        gr.Markdown(f"## {i18n('title')}", elem_id="kb-title")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                chat, box, lang, send, clear, examples = _inputs(i18n, feedback=store is not None)
                if store is not None:
                    add_chat_feedback(live, store, chat, turns)
            with gr.Column(scale=2, min_width=320, elem_id="kb-side"):
                gr.HTML(PANEL_HTML, elem_id="kb-panel", js_on_load=None)
        gr.Markdown(lambda: _stats_line(live), elem_id="kb-stats")

        io = {"inputs": [box, chat, history, lang, turns], "outputs": [box, chat, history]}
        send.click(respond, **io, concurrency_limit=CONCURRENT_ANSWERS)
        box.submit(respond, **io, concurrency_limit=CONCURRENT_ANSWERS)
        examples.click(lambda sample: sample[0], examples, box, queue=False).then(
            respond, **io, concurrency_limit=CONCURRENT_ANSWERS
        )
        clear.click(lambda: ("", [], []), None, [box, chat, history], queue=False)
    return demo, i18n


def mount_chat(app, live: LiveKb) -> None:
    """The chat at `/` of `app`: mounted last by the host, since a mount at `/` answers every
    path and routes added after it would never be reached."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from an offline tool
    _private_gradio_temp_dir()
    import gradio as gr

    _no_uploads(app)
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
        max_file_size=live.kb.settings.max_query_bytes,
    )
    _quiet_queue(demo)


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
