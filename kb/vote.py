"""A vote sent as fields, by a script (`POST /api/feedback`) or an agent (the MCP `feedback`
tool): checked by the rules of kb/request.py, so both doors refuse the same things with the same
words, and recorded in the store every door shares (kb/feedback.py).

    {"query": str, "vote": "up"|"down", "comment"?: str, "right_entry"?: str, "lang"?: "zh"|"en"|null,
     "answer"?: the JSON an answer or a search gave for the query}
    -> {"id": n, "vote": ..., "in_queue": bool, "shown": {"match", "entries": [...]}}  (vote_json)

With `answer`, the vote is stored with what that answer showed (kb/answer_json.py): with a
language model an answer may cite another entry than retrieval's first, or say none applies, and
a vote is about what was read. Without it, with what retrieval shows for the query now.
"""

from __future__ import annotations

from dataclasses import dataclass

from .answer_json import shown_in_answer
from .conversation import small_talk
from .errors import KbError
from .feedback import (
    MAX_COMMENT_CHARS,
    VOTES,
    FeedbackStore,
    Row,
    Shown,
    answered_by,
    shown_by,
)
from .naming import named_entry
from .request import RequestError, json_type, known_fields, lang_field, query_field

MAX_ENTRY_NAME_CHARS = 1000


@dataclass(frozen=True)
class Vote:
    """The fields of a vote, checked."""

    query: str
    vote: str
    lang: str | None
    comment: str
    right_entry: str | None
    answer: object  # None when not sent


def _text_field(body: dict, name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(422, f'field "{name}" must be a string, not {json_type(value)}')
    if len(value) > limit:
        raise RequestError(422, f'field "{name}" has {len(value)} characters; the limit is {limit}')
    return value


def vote_fields(body: dict, max_query_bytes: int) -> Vote:
    """The vote in `body`, or a RequestError naming the field that cannot be used."""
    known_fields(body, ("query", "vote", "comment", "right_entry", "lang", "answer"))
    query = query_field(body, max_query_bytes)
    if body.get("vote") not in VOTES:
        raise RequestError(422, 'field "vote" must be "up" or "down"')
    lang = lang_field(body)
    comment = _text_field(body, "comment", MAX_COMMENT_CHARS) or ""
    named = _text_field(body, "right_entry", MAX_ENTRY_NAME_CHARS)
    return Vote(query, body["vote"], lang, comment, named, body.get("answer"))


# How a refusal names what to correct: a field of the request (the API, MCP), or the terminal's option.
FIELD_NAMES = {"right_entry": 'field "right_entry"', "answer": 'field "answer"'}


def record_vote(kb, store: FeedbackStore | None, door: str, vote: Vote, names: dict = FIELD_NAMES) -> Row:
    """Store the vote with what was shown and the entry named as right; the stored row. A name
    that matches no entry, or an answer that cannot be this question's, is refused (422) before
    anything is stored."""
    if store is None:
        raise RequestError(503, "feedback is turned off on this server (feedback = false)")
    if small_talk(vote.query):  # "thanks!" got a word back, not an answer: a 👎 is no gap
        raise RequestError(
            422,
            f"{vote.query.strip()[:40]!r} is a word back (thanks, clear), not a question: no answer to rate",
        )
    try:
        right = named_entry(kb, vote.right_entry)
    except KbError as e:  # a name that matches nothing: the person can correct it
        raise RequestError(422, f"{names['right_entry']}: {e}") from None
    shown = _shown(kb, vote, names["answer"]) or shown_by(kb.search(vote.query, lang=vote.lang))
    row = store.get(store.add(door, vote.query, shown, answered_by(kb), vote.vote, vote.comment, right))
    if row is None:  # a vote row is never pruned: this would be a broken store
        raise KbError(f"the vote was not kept in {store.path}")
    return row


def vote_json(row: Row) -> dict:
    """What the API and MCP answer for a stored vote."""
    return {
        "id": row.id,
        "vote": row.vote,
        "in_queue": row.in_queue,
        "shown": {"match": row.match, "entries": row.shown},
        "right_entry": row.right,  # what the name given resolved to (a part of a title, doc:lines ...)
    }


def _shown(kb, vote: Vote, name: str) -> Shown | None:
    if vote.answer is None:
        return None
    try:
        return shown_in_answer(kb, vote.query, vote.answer)
    except KbError as e:
        raise RequestError(422, f"{name}: {e}") from None
