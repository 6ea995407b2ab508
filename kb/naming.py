"""The entry a person names as the right one (a 👎's "which entry was right", `kb feedback
--right`): by its id, where it is (`doc:start-end`, or a line inside it), its title, or a part of
its title that only one entry (or one entry and its translation) has. People type what they
remember: `--right "NCCL error(5)"` for "Paddle fails with NCCL error(5), invalid usage ..."
was refused, the README's own example among them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ingest.entry import Entry

from .errors import KbError

_LOCATION = re.compile(r"^(?P<doc>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")
_TITLE_NOISE = re.compile(r"[\W_]+")
_CJK = re.compile(r"[\u3400-\u9fff]")


def _norm_title(title: str) -> str:
    return _TITLE_NOISE.sub("", re.sub(r"^\s*(?:Q\d*|问题)\s*[:：]", "", title)).casefold()


def entry_at(entries: Iterable[Entry], named: str) -> Entry | None:
    """The entry `named` by its id or its place (`doc:start-end`, or `doc:line` inside it)."""
    named = named.strip().removeprefix("faq://")  # the resource URI the MCP door gives out
    if not named:
        return None
    entries = list(entries)
    for e in entries:
        if e.id == named or e.location == named:
            return e
    m = _LOCATION.match(named)
    if m:
        line = int(m["start"])
        for e in entries:
            if e.doc == m["doc"] and e.start_line <= line <= e.end_line:
                return e
    return None


def resolve_entry(entries: Iterable[Entry], named: str) -> Entry | None:
    """The entry `named` names, or None when it names none or several."""
    entries = list(entries)
    found = entry_at(entries, named)
    if found is not None:
        return found
    named = named.strip().removeprefix("faq://")
    title = _norm_title(named)
    if not title:
        return None
    exact = next((e for e in entries if _norm_title(e.title) == title), None)
    if exact is not None:
        return exact
    partial = [e for e in entries if title in _norm_title(e.title)]
    if len({frozenset((e.id, e.translation or e.id)) for e in partial}) != 1:
        return None
    # One entry and its translation: the one in the language the name was typed in.
    lang = "zh" if _CJK.search(named) else "en"
    return min(partial, key=lambda e: e.lang != lang)


def named_entry(kb, named: str | None) -> dict | None:
    """`named` resolved in the knowledge base `kb` as a stored reference (kb/feedback.py
    entry_ref); None when not given. A name that matches no entry, or several, is a KbError
    saying so (the person can correct it)."""
    from .feedback import entry_ref

    if named is None or not named.strip():
        return None
    found = resolve_entry(kb.index.entries, named)
    if found is None:
        raise KbError(
            f"no entry {named.strip()[:120]!r} in the index (or several have it): give its id, its doc:lines, "
            "its title or a part of the title no other entry has"
        )
    return entry_ref(found)
