"""Feedback in Slack: Slack's own 👍/👎 (a `feedback_buttons` element in a `context_actions`
block) under every answer, and after a 👎 a modal asking what was wrong and which entry was right.

Every answer the bot shows is stored as a row with no vote yet (kb/feedback.py: its question,
language, entries, match strength and index generation; rows nobody votes on are dropped after
a month, "no match" rows stay: they are the unanswered queue). The row's id is in the block's
`block_id`, so the `block_actions` request Slack sends when someone clicks names the answer
without any state in this process: a restart loses nothing. The modal carries the id in its
`private_metadata`. Blocks are plain dicts; slack_sdk is not imported here.
"""

from __future__ import annotations

import logging

from ...errors import KbError
from ...feedback import FeedbackStore, answered_by, shown_by
from ...naming import named_entry
from .blocks import MAX_BLOCKS

log = logging.getLogger("kb.slack")

ACTION_ID = "kb_feedback"
BLOCK_PREFIX = "kb_feedback:"
VIEW_ID = "kb_feedback_detail"
MAX_OPTION_CHARS = 75  # Slack's limit for an option's text
TEXT = {
    "en": {
        "up": "Helpful",
        "down": "Not helpful",
        "title": "What was wrong?",
        "send": "Send",
        "cancel": "Skip",
        "right": "The entry that answers it",
        "named": "Or its title, id or doc:lines",
        "comment": "What was wrong? (optional)",
    },
    "zh": {
        "up": "有帮助",
        "down": "没有帮助",
        "title": "哪里不对？",
        "send": "提交",
        "cancel": "跳过",
        "right": "能回答这个问题的条目",
        "named": "或输入它的标题、ID 或 doc:行号",
        "comment": "哪里不对？（可选）",
    },
}


def _plain(text: str) -> dict:
    return {"type": "plain_text", "text": text, "emoji": True}


def feedback_block(row_id: int, lang: str) -> dict:
    t = TEXT.get(lang, TEXT["en"])
    return {
        "type": "context_actions",
        "block_id": f"{BLOCK_PREFIX}{row_id}",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": ACTION_ID,
                "positive_button": {"text": _plain("👍"), "value": "up", "accessibility_label": t["up"]},
                "negative_button": {"text": _plain("👎"), "value": "down", "accessibility_label": t["down"]},
            }
        ],
    }


def with_feedback(messages: list[dict], row_id: int, lang: str) -> list[dict]:
    """The answer's messages with the buttons under the last one (or in a message of their own
    when the last one is full)."""
    block = feedback_block(row_id, lang)
    if len(messages[-1]["blocks"]) < MAX_BLOCKS:
        last = {**messages[-1], "blocks": [*messages[-1]["blocks"], block]}
        return [*messages[:-1], last]
    return [*messages, {"text": messages[-1]["text"][:200], "blocks": [block]}]


def row_of(block_id: str) -> int | None:
    if not block_id.startswith(BLOCK_PREFIX) or not block_id[len(BLOCK_PREFIX) :].isdigit():
        return None
    return int(block_id[len(BLOCK_PREFIX) :])


def _option(entry: dict) -> dict:
    label = f"{entry['title']} ({entry['doc']}:{entry['start_line']}-{entry['end_line']})"
    if len(label) > MAX_OPTION_CHARS:
        label = label[: MAX_OPTION_CHARS - 1] + "…"
    return {"text": _plain(label), "value": entry["entry_id"]}


def detail_view(row_id: int, entries: list[dict], lang: str) -> dict:
    """The modal after a 👎: the entries the answer showed to pick from, a name to type, a comment."""
    t = TEXT.get(lang, TEXT["en"])
    blocks: list[dict] = []
    if entries:
        select = {
            "type": "static_select",
            "action_id": "entry",
            "options": [_option(e) for e in entries[:100]],
        }
        blocks.append(
            {
                "type": "input",
                "block_id": "right",
                "optional": True,
                "label": _plain(t["right"]),
                "element": select,
            }
        )
    for block_id, label, multiline in (("named", t["named"], False), ("comment", t["comment"], True)):
        element = {
            "type": "plain_text_input",
            "action_id": "text",
            "multiline": multiline,
            "max_length": 2000,
        }
        blocks.append(
            {
                "type": "input",
                "block_id": block_id,
                "optional": True,
                "label": _plain(label),
                "element": element,
            }
        )
    return {
        "type": "modal",
        "callback_id": VIEW_ID,
        "private_metadata": str(row_id),
        "title": _plain(t["title"]),
        "submit": _plain(t["send"]),
        "close": _plain(t["cancel"]),
        "blocks": blocks,
    }


def _submitted(values: dict) -> tuple[str | None, str]:
    """(the entry named, by the select or typed; the comment) from a modal's state values."""
    picked = ((values.get("right") or {}).get("entry") or {}).get("selected_option") or {}
    typed = ((values.get("named") or {}).get("text") or {}).get("value") or ""
    comment = ((values.get("comment") or {}).get("text") or {}).get("value") or ""
    return (typed.strip() or picked.get("value")), comment


class SlackFeedback:
    """Records the answers the bot shows and the votes on them (listeners for bolt's App)."""

    def __init__(self, live, store: FeedbackStore | None, client) -> None:
        self.live, self.store, self.client = live, store, client

    def register(self, app) -> None:
        app.action(ACTION_ID)(self.on_action)
        app.view(VIEW_ID)(self.on_view)

    def attach(self, messages: list[dict], query: str, answer) -> list[dict]:
        """Store the answer (no vote yet) and put the buttons under it; a word back to thanks or
        "clear" is no answer: nothing to rate."""
        if self.store is None or answer.reply:
            return messages
        try:
            row = self.store.add("slack", query, shown_by(answer), answered_by(self.live.get()))
        except KbError as e:  # a broken store must not cost the answer
            log.warning("could not store an answer for feedback: %s", e)
            return messages
        return with_feedback(messages, row, answer.lang)

    def on_action(self, ack, body) -> None:
        """A 👍 or 👎 clicked (`block_actions`): the vote on the row; a 👎 opens the modal."""
        ack()
        if self.store is None:
            return
        for action in body.get("actions") or []:
            row_id, vote = row_of(action.get("block_id") or ""), action.get("value")
            if row_id is None or vote not in ("up", "down") or not self.store.vote(row_id, vote):
                log.info("ignored a feedback action for no stored answer (%s)", action.get("block_id"))
                continue
            row = self.store.get(row_id)
            if vote == "down" and row is not None and body.get("trigger_id"):
                self._open(body["trigger_id"], detail_view(row_id, row.shown, row.lang))

    def _open(self, trigger_id: str, view: dict) -> None:
        from slack_sdk.errors import SlackApiError

        try:
            self.client.views_open(trigger_id=trigger_id, view=view)
        except SlackApiError as e:  # the vote is stored; the details are optional
            log.info("could not open the feedback form: %s", e.response.get("error"))

    def on_view(self, ack, view) -> None:
        """The modal sent (`view_submission`): the comment and the named entry on the row."""
        meta = str(view.get("private_metadata") or "")
        named, comment = _submitted((view.get("state") or {}).get("values") or {})
        if self.store is None or not meta.isdigit():
            ack()
            return
        try:
            right = named_entry(self.live.get(), named)
        except KbError as e:  # shown under the field, the modal stays open
            ack(response_action="errors", errors={"named": str(e)[:150]})
            return
        try:  # stored before the answer to Slack: once the form closes, the row has it
            self.store.vote(int(meta), "down", comment, right)
        except KbError as e:
            log.warning("could not store the feedback form: %s", e)
        ack()
