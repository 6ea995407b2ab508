"""An index's precedents (index/precedents.py), read from the files the `precedents` setting names.

A file is labelled posts, one JSON object a line, in either form `kb eval` reads: what `kb
feedback export --gold FILE --confirmed` writes (`query` and `expected: [{doc, line, title}]`:
the questions your people confirmed, each with the entry that answered it), or the real-post form
(`text` and `expected: [{doc, start_line, end_line}]`). A row is kept when one of its labels
names an entry of this index; rows about other indexes and lines that are not such a row teach
nothing here and are left out. A row with `expected: []` is a post nothing answers, kept as a gap
(index/precedents.py), unless it says `"checked": false`: a "no match" nobody has looked at (kb
feedback export writes those so), which may be a question the index answers and the search
missed. A gap names no entry, so the files of an index should hold its own posts only. When no
answered post is left, opening the index fails with a message that says which files to give.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import KbError

MAX_PRECEDENTS = 5000  # rows read per index; each costs one embedding when the index is opened


def _labelled_posts(path: Path) -> list[tuple[str, list]]:
    """(post text, its labels) of every usable row of a file; no labels: a checked gap."""
    from index.labels import parse_expected

    try:
        lines = path.read_text("utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise KbError(
            f"precedents: cannot read {path} ({e}); the `precedents` setting names labelled posts files"
        ) from e
    out = []
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
            text = row.get("query", row.get("text"))
            labels = [parse_expected(x, f"{path}:{n}") for x in row["expected"]]
            checked = labels or row.get("checked", True) is not False
        except (ValueError, AttributeError, TypeError, KeyError, KbError):
            continue
        if isinstance(text, str) and text.strip() and checked:
            out.append((text, labels))
    return out


def _embedded(searcher, texts: list[str], known: dict) -> list:
    """The query embeddings of `texts`, those of an earlier load taken from `known` (text ->
    vector), which is left holding these texts' only: embedding 5,000 precedents again would
    hold up every reload of a rebuilt index."""
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    if todo:
        known.update(zip(todo, searcher.embedder.embed_queries(todo), strict=True))
    kept = {t: known[t] for t in texts}
    known.clear()
    known.update(kept)
    return [kept[t] for t in texts]


def load_precedents(setting: str, searcher, known: dict | None = None):
    """The Precedents of `searcher`'s index from the comma-separated files in `setting`; `known`:
    the embeddings of an earlier load by text (see _embedded)."""
    from index.labels import answering, by_document
    from index.precedents import Precedents, precedent_text

    index = searcher.index
    docs = by_document(index.entries)
    texts: list[str] = []
    answers: list[frozenset[int]] = []
    gaps: list[str] = []
    paths = [Path(p.strip()).expanduser() for p in setting.split(",") if p.strip()]
    for path in paths:
        for text, labels in _labelled_posts(path):
            found = answering(index.entries, index.by_id, labels, docs) if labels else frozenset()
            if len(texts) + len(gaps) >= MAX_PRECEDENTS or (labels and not found):
                continue
            (texts if found else gaps).append(precedent_text(searcher.read(text)[1]))
            if found:
                answers.append(found)
    if not texts:
        raise KbError(
            f"precedents: no labelled post in {', '.join(map(str, paths))} names an entry of this index; "
            "give the files written for it (kb feedback export --gold FILE --confirmed --index INDEX)"
        )
    vectors = _embedded(searcher, texts + gaps, {} if known is None else known)
    return Precedents.of(vectors[: len(texts)], answers, vectors[len(texts) :], texts, gaps)
