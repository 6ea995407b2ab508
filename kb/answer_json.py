"""What an answer a client got showed, read back from its JSON for a vote on it.

A vote is about what the person read. With a language model, `/api/ask` may cite another entry
than retrieval's first, or say that none applies, so searching the question again when the vote
arrives can store something the person never saw. A client sends the JSON it got
(kb/schema.py `ask_json` or `search_json`) and the vote is stored with what that JSON showed,
read as kb/feedback.py `shown_by` reads an Answer or a SearchResult, and checked against the
index: an answer to another question, or naming an entry the index does not hold, is refused.
"""

from __future__ import annotations

from .answer import in_language
from .errors import KbError
from .feedback import Shown, entry_ref
from .query import valid_text

STRENGTHS = ("match", "weak", "none")  # the values of Answer.strength and SearchResult.strength
MAX_SHOWN_ENTRIES = 100


def shown_in_answer(kb, query: str, answer: object) -> Shown:
    """What `answer` (the JSON /api/ask or /api/search returned for `query`) showed, in `kb`'s
    index. A KbError says what is wrong with it."""
    if not isinstance(answer, dict):
        raise KbError(
            "it must be the JSON object an answer or a search gave (kb ask --json, /api/ask, /api/search, MCP ask)"
        )
    strength = answer.get("match")
    if strength not in STRENGTHS:
        raise KbError('it has no "match" of "match", "weak" or "none"')
    _check_same_question(query, answer)
    nearest = _listed(answer, "suggestions") if strength == "none" else []
    if "citations" in answer:  # an answer: the nearest entries when none applies, then its sources
        listed = nearest + _listed(answer, "citations")
    else:  # a search result: its hits, or the nearest entries
        listed = nearest or _listed(answer, "hits")
    if strength != "none" and not listed:
        raise KbError(f'it is a "{strength}" that shows no entry')
    lang = "zh" if answer.get("lang") == "zh" else "en"  # as shown_by stores it
    entries = tuple(entry_ref(_entry_shown(kb, item, lang)) for item in listed[:MAX_SHOWN_ENTRIES])
    return Shown(strength, lang, entries)


def echoed_question(answer: object) -> str:
    """The question an answer echoes, when it holds the whole of it (a long paste is echoed in part)."""
    saved = answer if isinstance(answer, dict) else {}
    echoed = saved.get("query")
    if not isinstance(echoed, str):
        raise KbError("the answer names no question: give the question too")
    if saved.get("query_truncated"):
        raise KbError("the answer holds only the start of a long question: give it too")
    return echoed


def _check_same_question(query: str, answer: dict) -> None:
    """The answer echoes the question it answers (kb/schema.py `query_echo`), normalised as the
    service reads it; a follow-up searched with the earlier question comes last in the echo. Line
    endings and the spaces around it do not count (agents re-serialise strings); a long question
    is checked by its echoed start, or for a follow-up by its echoed end."""
    echoed = answer.get("query")
    if not isinstance(echoed, str):
        raise KbError('it has no "query": send the whole answer as it was given')
    asked = _plain(valid_text(query).replace("\x00", " "))
    if answer.get("query_truncated"):
        head = _plain(echoed.removesuffix(" …"))
        tail = answer.get("query_tail")
        tail = _plain(tail) if isinstance(tail, str) else ""
        same = asked.startswith(head) or bool(tail and (tail.endswith(asked) or asked.endswith(tail)))
    else:
        echoed = _plain(echoed)
        same = echoed == asked or echoed.endswith("\n" + asked)
    if not same:
        start = " ".join(echoed.split())[:60]
        raise KbError(f'it answers another question than "query" (its question starts "{start}")')


def _plain(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _listed(answer: dict, name: str) -> list:
    items = answer.get(name) or []
    if not isinstance(items, list):
        raise KbError(f'its "{name}" must be a list')
    return items


def _entry_shown(kb, item: object, lang: str):
    """The entry a hit or a citation showed, in the reader's language as the doors show it."""
    entries, by_id = kb.index.entries, kb.index.by_id
    entry_id = item.get("entry_id") if isinstance(item, dict) else None
    if not isinstance(entry_id, str) or entry_id not in by_id:
        raise KbError(
            f"it shows an entry this index does not hold ({str(entry_id)[:80]!r}): the index was rebuilt "
            "since (an entry's id changes with its title) or it was answered from another one; ask again and "
            "vote on the new answer, or vote without the answer"
        )
    translated = item.get("translation") if isinstance(item, dict) else None
    other = translated.get("entry_id") if isinstance(translated, dict) else None
    translation = entries[by_id[other]] if isinstance(other, str) and other in by_id else None
    return in_language(entries[by_id[entry_id]], translation, lang)
