"""The JSON shapes every door returns (CLI --json, HTTP API, Slack payload building)."""

from __future__ import annotations

from index.search import Hit, SearchResult
from ingest.code import is_destructive, placeholders
from ingest.entry import Entry

from .answer import Answer


def entry_ref(e: Entry) -> dict:
    """Where an entry is: its id, document, lines and title."""
    return {
        "entry_id": e.id,
        "doc": e.doc,
        "start_line": e.start_line,
        "end_line": e.end_line,
        "title": e.title,
    }


def _ref(e: Entry | None) -> dict | None:
    return None if e is None else entry_ref(e)


def hit_json(h: Hit, answers: bool = False) -> dict:
    """A hit; `answers`: it is the match, the one hit whose commands are given. A closest entry,
    the hits below a match and the suggestions beside "no match" may be other problems: an
    agent walking `hits[*].commands` found `sudo sh <CudaInstaller>.run --driver` under a "no
    match". Their commands stay in the entry (`get_entry`, /api/entry/ID)."""
    e = h.entry
    return {
        "entry_id": e.id,
        "title": e.title,
        "lang": e.lang,
        "doc": e.doc,
        "start_line": e.start_line,
        "end_line": e.end_line,
        "heading_path": list(e.heading_path),
        "score": round(h.score, 6),
        **command_lists(e.commands if answers else ()),
        "translation": _ref(h.translation),
        "why": {
            "dense_rank": h.dense_rank,
            "lexical_rank": h.lexical_rank,
            "dense_score": round(h.dense_score, 4),
            "matched_signature": h.matched_signature,
        },
    }


# A query is echoed back whole up to this many characters; a pasted log is not (392 KB of JSON
# for a 5,000-line log): its start, an ellipsis, and "query_chars" with its full length.
QUERY_ECHO_CHARS = 2000


def query_echo(query: str) -> dict:
    """The question an answer is about: whole, or its start and its end ("query_tail": where a
    follow-up read with the earlier turns is, so a vote on it can be checked)."""
    if len(query) <= QUERY_ECHO_CHARS:
        return {"query": query}
    return {
        "query": query[: QUERY_ECHO_CHARS // 2] + " …",
        "query_tail": query[-(QUERY_ECHO_CHARS // 2) :],
        "query_chars": len(query),
        "query_truncated": True,
    }


def search_json(r: SearchResult) -> dict:
    return {
        **query_echo(r.query),
        "lang": r.lang,
        "no_match": r.no_match,
        "vague": r.vague,  # no match because the query names nothing specific: ask for the error
        "match": r.strength,
        "confidence": None if r.confidence is None else round(r.confidence, 4),
        "hits": [hit_json(h, answers=n == 0 and r.strength == "match") for n, h in enumerate(r.hits)],
        "suggestions": [hit_json(h) for h in r.suggestions],
    }


def ask_json(a: Answer) -> dict:
    return {
        **query_echo(a.query),
        "lang": a.lang,
        "no_match": a.no_match,
        "match": a.strength,
        "reply": a.reply,  # a word back to thanks or "clear": nothing was searched, nothing to show
        "matched_line": a.matched_line,
        "answer": a.text,
        **command_lists(a.commands),
        "citations": [
            {
                "n": c.n,
                "entry_id": c.entry.id,
                "doc": c.entry.doc,
                "start_line": c.entry.start_line,
                "end_line": c.entry.end_line,
                "title": c.entry.title,
            }
            for c in a.citations
        ],
        "mode": a.mode,
        "notice": a.notice,
        "removed_commands": list(a.removed_commands),
        "removed_citations": list(a.removed_citations),
        "suggestions": [hit_json(h) for h in a.suggestions],
    }


def entry_json(e: Entry, translation: Entry | None = None) -> dict:
    d = {**e.to_dict(), **command_lists(e.commands)}
    d["translation_entry"] = (
        {**translation.to_dict(), **command_lists(translation.commands)} if translation else None
    )
    return d


def command_lists(commands) -> dict:
    """Commands as every JSON door gives them: all of them, the ones that delete, kill or stop
    (to confirm with a person first), and the ones with a placeholder to fill in first."""
    return {
        "commands": list(commands),
        "destructive_commands": [c for c in commands if is_destructive(c)],
        "placeholder_commands": [c for c in commands if placeholders(c)],
    }
