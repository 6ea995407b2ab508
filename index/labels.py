"""Labels: which entry of an index a labelled post names (a document and a line, a title, or a
line range), read by evaluation (evaluation/gold.py) and by an index's precedents
(kb/precedents.py) alike."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ingest.entry import Entry
from ingest.errors import KbError


@dataclass(frozen=True)
class Expected:
    doc: str
    line: int | None = None
    title: str | None = None
    start: int | None = None  # a labelled line range (real posts); right when half the entry is inside
    end: int | None = None
    kb: str | None = None  # which knowledge base of the set the entry is in
    translation_of: int | None = None  # the same answer as expected item i, in the other language


def parse_expected(item, where: str) -> Expected:
    if not isinstance(item, dict) or not isinstance(item.get("doc"), str):
        raise KbError(f"{where}: each expected item needs a 'doc' and a 'line', a 'title' or a line range")
    line, title = item.get("line"), item.get("title")
    start, end = item.get("start_line"), item.get("end_line")
    if start is not None and end is not None:
        t = item.get("translation_of")
        return Expected(item["doc"], None, title or None, int(start), int(end), item.get("kb"), t)
    if line is None and not title:
        raise KbError(f"{where}: expected item for {item['doc']} needs a 'line' or a 'title'")
    return Expected(item["doc"], int(line) if line is not None else None, title or None)


_Q_PREFIX = re.compile(r"^\s*(?:Q\d*|问题)\s*[:：]\s*", re.I)
_TITLE_NOISE = re.compile(r"[`*_\s]+")


def norm_title(title: str) -> str:
    """Titles compared without markdown, spacing, case, a `Q:` prefix or end punctuation."""
    t = _TITLE_NOISE.sub("", _Q_PREFIX.sub("", title)).lower()
    return t.rstrip("?？:：。.!！")


def entry_matches(e: Entry, x: Expected) -> bool:
    if e.doc != x.doc:
        return False
    if x.start is not None and x.end is not None:
        inside = min(e.end_line, x.end) - max(e.start_line, x.start) + 1
        return inside * 2 >= e.end_line - e.start_line + 1
    if x.line is not None and e.start_line <= x.line <= e.end_line:
        return True
    return x.title is not None and norm_title(e.title) == norm_title(x.title)


def by_document(entries: Sequence[Entry]) -> dict[str, list[int]]:
    """Document -> the positions of its entries: what `answering` looks through."""
    out: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        out.setdefault(e.doc, []).append(i)
    return out


def answering(
    entries: Sequence[Entry],
    by_id: dict,
    expected: Sequence[Expected],
    by_doc: dict[str, list[int]] | None = None,
) -> frozenset[int]:
    """The positions of the entries that a post's labels name, with their translations. by_doc
    (by_document of the same entries): only the labelled documents' entries are looked at, as
    5,000 labelled posts against an index of 100,000 entries must."""
    out: set[int] = set()
    docs = by_doc if by_doc is not None else by_document(entries)
    for i in sorted({i for x in expected for i in docs.get(x.doc, ())}):
        e = entries[i]
        if any(entry_matches(e, x) for x in expected):
            out.add(i)
            j = by_id.get(e.translation) if e.translation else None
            if j is not None:
                out.add(j)
    return frozenset(out)
