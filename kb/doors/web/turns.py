"""The chat's turns: a question and its streamed answer, the same answer again in another language
or regenerated, a new chat (with undo), and the conversation kept in the browser.

Every handler returns the same outputs, in this order (gr.skip() leaves one as it is):
    box, chat, history, saved, send, stop, undo
`history` is the conversation as the core reads it, [role, text] per turn; `saved` is what the
browser keeps across reloads ({"chat": ..., "history": ...}); `chat` is what the Chatbot shows.
gradio is imported inside the functions.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator

from ...answer import Answer
from ...errors import KbError
from ...present import reader_language
from ...query import excerpt, kept_note
from ...service import KnowledgeBase
from ..host.live import LiveKb
from .render import UI, escape_md_html, render_answer, render_user, share_link

log = logging.getLogger("kb.web")

STREAM_MIN_INTERVAL_S = 0.05  # do not push more than ~20 partial updates a second to the browser
KEPT_TURN_CHARS = 64 * 1024  # a turn the browser keeps: the part of a log that matters, not all of it
SAVED_TURNS = 40  # turns kept in the browser


class _Stream:
    """Run `kb.ask` in a thread and hand its `on_token` pieces to a generator as they come."""

    _DONE = object()

    def __init__(self, kb: KnowledgeBase, query: str, lang: str | None, history: list) -> None:
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


def _lang(choice: str) -> str | None:
    return None if choice in ("auto", "", None) else choice


def _kept(text: str) -> str:
    return excerpt(text, KEPT_TURN_CHARS).text


def saved_value(chat: list, history: list) -> dict:
    return {"chat": chat[-2 * SAVED_TURNS :], "history": history[-2 * SAVED_TURNS :]}


def _buttons(busy: bool):
    import gradio as gr

    return gr.update(visible=not busy), gr.update(visible=busy)


def fit_paste(live: LiveKb, message: str, lang: str) -> tuple[str, str]:
    """The query a message becomes: itself, or for a paste over the query limit the part that
    matters, with a sentence saying what was kept (never a bare error)."""
    limit = live.kb.settings.max_query_bytes
    part = excerpt(message, limit)
    if not part.cut:
        return message, ""
    return part.text, kept_note(part, lang)


def answer_markdown(kb: KnowledgeBase, answer: Answer, lang: str | None) -> str:
    share = share_link(answer.query, lang, UI[answer.lang if answer.lang in UI else "en"]["share"])
    return render_answer(answer, kb.settings.docs_base_url, kb.entry, share)


def _stream_answer(live: LiveKb, query: str, lang: str | None, history: list, chat: list):
    """Yield the chat as the answer streams; return (answer or None, the final bot message)."""
    kb = live.get()
    shown_lang = reader_language(query, lang)
    text, last = "", 0.0
    try:
        stream = _Stream(kb, query, lang, [tuple(t) for t in history])
        for piece in stream.pieces():
            text += piece
            if time.monotonic() - last >= STREAM_MIN_INTERVAL_S:
                last = time.monotonic()
                chat[-1] = {"role": "assistant", "content": escape_md_html(text) + " ▌"}
                yield chat
        assert stream.answer is not None
        chat[-1] = {"role": "assistant", "content": answer_markdown(kb, stream.answer, lang)}
        return stream.answer
    except KbError as e:  # empty, ...: the message says what to do
        chat[-1] = {"role": "assistant", "content": f"⚠ {escape_md_html(str(e))}"}
    except Exception as e:
        log.exception("kb serve: chat request failed")
        chat[-1] = {
            "role": "assistant",
            "content": "⚠ " + UI[shown_lang]["error"].format(kind=type(e).__name__),
        }
    return None


def respond(live: LiveKb, message: str, chat: list, history: list, lang_choice: str, on_answer=None):
    """One turn: the question at once (the box emptied), the answer as it streams, then the
    final answer. Text typed into the box meanwhile stays there. on_answer(index, query, answer
    or None) is told what the answer at chat[index] showed (the vote needs it: feedback.py)."""
    import gradio as gr

    if not message or not message.strip():
        yield (gr.skip(),) * 7
        return
    lang = _lang(lang_choice)
    shown_lang = reader_language(message[:200_000], lang)
    query, kept = fit_paste(live, message, shown_lang)
    chat = [
        *chat,
        {"role": "user", "content": render_user(message, shown_lang, kept)},
        {"role": "assistant", "content": f"*{UI[shown_lang]['thinking']}*"},
    ]
    send, stop = _buttons(True)
    yield "", chat, gr.skip(), gr.skip(), send, stop, gr.update(visible=False)
    if on_answer is not None:
        on_answer(len(chat) - 1, query, None)  # nothing to rate there until the answer stands
    answer = yield from _answer_into(live, query, lang, history, chat)
    if on_answer is not None:
        on_answer(len(chat) - 1, query, answer)
    if answer is not None:
        history = [*history, ["user", _kept(query)], ["assistant", answer.text]]
    send, stop = _buttons(False)
    yield gr.skip(), chat, history, saved_value(chat, history), send, stop, gr.skip()


def _answer_into(live: LiveKb, query: str, lang: str | None, history: list, chat: list):
    """Stream into chat[-1] (yielding the 7 outputs), returning the answer or None."""
    import gradio as gr

    stream = _stream_answer(live, query, lang, history, chat)
    try:
        while True:
            yield gr.skip(), next(stream), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    except StopIteration as done:
        return done.value


def again(live: LiveKb, chat: list, history: list, lang_choice: str, on_answer=None):
    """The last answer again: in the newly chosen language, or regenerated (the chat's retry)."""
    import gradio as gr

    if len(history) < 2 or not chat or chat[-1].get("role") != "assistant":
        yield (gr.skip(),) * 7
        return
    query, earlier = history[-2][1], history[:-2]
    lang = _lang(lang_choice)
    chat = [*chat[:-1], {"role": "assistant", "content": f"*{UI[reader_language(query, lang)]['thinking']}*"}]
    send, stop = _buttons(True)
    yield gr.skip(), chat, gr.skip(), gr.skip(), send, stop, gr.skip()
    if on_answer is not None:
        on_answer(len(chat) - 1, query, None)
    answer = yield from _answer_into(live, query, lang, earlier, chat)
    if on_answer is not None:
        on_answer(len(chat) - 1, query, answer)
    if answer is not None:
        history = [*earlier, ["user", query], ["assistant", answer.text]]
    send, stop = _buttons(False)
    yield gr.skip(), chat, history, saved_value(chat, history), send, stop, gr.skip()


def stopped(chat: list):
    """After Stop: the partial answer stays, marked as stopped; the buttons come back."""
    import gradio as gr

    if chat and chat[-1].get("role") == "assistant":
        content = _text(chat[-1].get("content", "")).rstrip().removesuffix("▌").rstrip()
        note = f"{UI['en']['stopped']} · {UI['zh']['stopped']}"
        chat = [*chat[:-1], {"role": "assistant", "content": f"{content}\n\n*{note}*"}]
    send, stop = _buttons(False)
    return gr.skip(), chat, gr.skip(), gr.skip(), send, stop, gr.skip()


def _text(content) -> str:
    """A message's markdown: Gradio hands the chat back as a list of parts ({"type": "text", ...})."""
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def new_chat(chat: list, history: list):
    """Forget everything (the screen, the history the core reads, the browser's copy), keeping
    the old conversation for Undo until the next question."""
    import gradio as gr

    undo = gr.update(visible=bool(chat))
    return "", [], [], saved_value([], []), gr.skip(), gr.skip(), undo, {"chat": chat, "history": history}


def undo_new_chat(cleared: dict):
    import gradio as gr

    chat, history = cleared.get("chat", []), cleared.get("history", [])
    return (
        gr.skip(),
        chat,
        history,
        saved_value(chat, history),
        gr.skip(),
        gr.skip(),
        gr.update(visible=False),
    )


def restore(saved: dict | None):
    """The conversation kept in the browser, after a reload."""
    import gradio as gr

    if not isinstance(saved, dict) or not saved.get("chat"):
        return gr.skip(), gr.skip()
    return saved.get("chat", []), saved.get("history", [])
