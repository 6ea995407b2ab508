"""The chat's feedback: Gradio's chatbot thumbs under every answer, and after a 👎 a small form
asking what was wrong and which entry was right. Votes go to the store every door shares
(kb/feedback.py); nothing here changes an answer or the ranking.

What each answer showed is remembered per browser session in a gr.State dict (`turns`: the
answer's index in the chat -> the question, its language, the match strength and entries, the
index generation and, once stored, its row). `respond` and `again` in turns.py fill it through
`on_answer`; the vote reads it. The dict is changed in place: Gradio keeps a State's object
for the session and hands the same object to every event, so the chat's answer event need not
list it among its outputs. A "no match" answer is stored at once (it is the unanswered queue);
a vote on it updates that row instead of counting the question twice.

gradio is imported inside the functions.
"""

# No `from __future__ import annotations`: Gradio reads `data: gr.LikeData` at runtime to pass
# the like event's data.
import logging

from ...errors import KbError
from ...feedback import FeedbackStore, answered_by, record_unanswered, shown_by
from ...naming import named_entry
from ..host.live import LiveKb

log = logging.getLogger("kb.web")

MAX_TURNS = 100  # answers remembered per session (older ones can no longer be rated)
TEXT = {
    "form": "**What was wrong? · 哪里不对？** Name the entry that answers it, if you know it. · 如果知道，请指出正确的条目。",
    "right": "The right entry: pick one, or type its title, id or doc:lines · 正确的条目：选择，或输入标题、ID 或 doc:行号",
    "comment": "Comment (optional) · 备注（可选）",
    "send": "Send feedback · 提交反馈",
    "thanks": "Thanks, recorded. · 已记录，谢谢。",
    "thanks_named": "Thanks, recorded with the right entry: {title} · 已记录正确的条目：{title}",
    "gone": "This answer can no longer be rated (the page was reloaded or it is too old). · 这个回答已无法评价。",
    "reply": "Nothing to rate: that was a word back, not an answer. · 这只是一句回应，不是回答，无需评价。",
}


def remember(live: LiveKb, store: FeedbackStore | None, turns: dict, index: int, query: str, answer) -> None:
    """What the answer at chat position `index` showed (None: an error message, nothing to rate)."""
    turns.pop(index, None)
    if answer is None:
        return
    if answer.reply:  # a word back to thanks or "clear": no answer, no vote, never in the queue
        turns[index] = {"reply": True}
        return
    kb = live.get()
    shown = shown_by(answer)
    try:
        row = record_unanswered(store, "web", kb, query, answer)
    except KbError as e:  # a broken store must not break the chat
        log.warning("could not store the unanswered question: %s", e)
        row = None
    turns[index] = {"query": query, "shown": shown, "by": answered_by(kb), "row": row}
    for old in sorted(turns)[:-MAX_TURNS]:
        del turns[old]


def _choices(shown) -> list[tuple[str, str]]:
    return [
        (f"{e['title'][:90]} · {e['doc']}:{e['start_line']}-{e['end_line']}", e["entry_id"])
        for e in shown.entries
    ]


def _store_vote(store: FeedbackStore, turn: dict, vote: str) -> int:
    """The turn's row with this vote: its "no match" row, or the row of an earlier vote on it,
    updated; else a new one."""
    if turn.get("row") is not None and store.vote(turn["row"], vote):
        return turn["row"]
    turn["row"] = store.add("web", turn["query"], turn["shown"], turn["by"], vote)
    return turn["row"]


def on_vote(store: FeedbackStore, turns: dict, data):
    """A thumb clicked: store the vote; after 👎 open the form. Outputs: form, entry choices,
    comment, note, the row the form completes."""
    import gradio as gr

    index = data.index if isinstance(data.index, int) else data.index[0]
    vote = {True: "up", False: "down"}.get(data.liked)
    if vote is None:  # the thumb was clicked again (no vote) or another option: nothing to store
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    turn = turns.get(index)
    if turn is None:
        return gr.update(visible=False), gr.skip(), gr.skip(), TEXT["gone"], None
    if turn.get("reply"):
        return gr.update(visible=False), gr.skip(), gr.skip(), TEXT["reply"], None
    try:
        row = _store_vote(store, turn, vote)
    except KbError as e:
        log.warning("could not store a vote: %s", e)
        return gr.update(visible=False), gr.skip(), gr.skip(), f"⚠ {e}", None
    if vote == "up":
        return gr.update(visible=False), gr.skip(), gr.skip(), TEXT["thanks"], None
    choices = gr.update(choices=_choices(turn["shown"]), value=None)
    return gr.update(visible=True), choices, "", "", row


def on_details(live: LiveKb, store: FeedbackStore, row, right, comment):
    """The 👎 form sent: the comment and the named entry, on the vote's row. Outputs: form, note,
    the pending row."""
    import gradio as gr

    if row is None:
        return gr.update(visible=False), gr.skip(), None
    try:
        named = named_entry(live.get(), right if isinstance(right, str) else None)
    except KbError as e:  # the person can correct the name and send again
        return gr.skip(), f"⚠ {e}", row
    store.vote(row, "down", comment or "", named)
    note = TEXT["thanks_named"].format(title=named["title"]) if named else TEXT["thanks"]
    return gr.update(visible=False), note, None


def add_chat_feedback(live: LiveKb, store: FeedbackStore, chat, turns) -> None:
    """The 👎 form under the chat, and the chat's like event (call inside the page's Blocks)."""
    import gradio as gr

    with gr.Group(visible=False, elem_id="kb-feedback") as form:
        gr.Markdown(TEXT["form"])
        right = gr.Dropdown(
            label=TEXT["right"], choices=[], allow_custom_value=True, elem_id="kb-feedback-entry"
        )
        comment = gr.Textbox(label=TEXT["comment"], lines=2, max_length=2000, elem_id="kb-feedback-comment")
        send = gr.Button(TEXT["send"], variant="secondary", elem_id="kb-feedback-send")
    note = gr.Markdown(elem_id="kb-feedback-note")
    pending = gr.State(None)

    def vote(turns: dict, data: gr.LikeData):
        return on_vote(store, turns, data)

    def details(row, right_value, comment_value):
        return on_details(live, store, row, right_value, comment_value)

    chat.like(vote, [turns], [form, right, comment, note, pending], queue=False)
    send.click(details, [pending, right, comment], [form, note, pending], queue=False)
