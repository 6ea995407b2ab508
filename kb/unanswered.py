"""The unanswered queue: every "no match" and every thumbs-down (kb/feedback.py), grouped by
error signature, and written out as gold rows a maintainer reviews and adds to a regression set.

`kb feedback export --confirmed` adds the answers people confirmed with a thumbs-up, as rows whose
right entry is the one the answer showed first (`export_rows` says how the two agree or not):
with the queue, the labelled posts a team refits the ranking model on (`eval/fit.py --gold`).

The signature is what crash-grouping systems key on: the post's most telling error line as the
post reader cleans it (index/post.py: timestamps, hosts, IPs, addresses, paths, pids and ranks
already gone), from its exception name on, without the words that still hold numbers, together
with its error codes (index/codes.py:
`nccl_error_2` stays apart from `nccl_error_5`). Ten people pasting the same failure from
different machines at different times make one group with a count of ten. A question with no
error line groups by its words.

Nothing here feeds back into ranking: the way from feedback to better answers goes through a
person who reviews the exported rows and refits (eval/fit.py --gold), so a change is measured
before it ships.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .feedback import Row

MAX_SIGNATURE_CHARS = 200_000  # of a paste read for its signature (the post reader bounds the rest)
_WORDS = re.compile(r"[\W_]+")
_EXCEPTION = re.compile(r"\b[A-Za-z_][\w.]*(?:Error|Exception)\b")


def _key_words(line: str) -> str:
    """An error line as a key: from its exception name on when it has one (what a launcher or a
    logger printed before it varies), without the words that hold a number (ranks, ports,
    sizes, ids the cleaning left; the codes are keyed apart), a path (`/dev/shm/nccl-LeXlEJ`: a
    system path is kept whole for search, and its file is named anew by every run) or a cut host
    name (`gpu-node-`)."""
    m = _EXCEPTION.search(line)
    if m:
        line = line[m.start() :]
    words = [
        w
        for w in line.casefold().split()
        if not any(c.isdigit() or c == "/" for c in w) and not w.endswith("-")
    ]
    return " ".join(w for w in words if w.strip("[]") != "rank")


def signature(query: str) -> tuple[str, str]:
    """(group key, what the group shows) for a question or a pasted log."""
    from index.post import read_post

    post = read_post(query[:MAX_SIGNATURE_CHARS])
    line = next(iter(post.errors or post.exceptions), "")
    codes = ",".join(sorted(post.codes))
    if line:
        key = f"error|{codes}|{_key_words(line)}"
        label = line[m.start() :] if (m := _EXCEPTION.search(line)) else line
    else:
        words = post.question or query
        key = f"words|{codes}|{_WORDS.sub(' ', words.casefold()).strip()[:300]}"
        label = " ".join(words.split())
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16], label[:200]


@dataclass
class Group:
    """The queue's rows of one signature."""

    signature: str
    label: str
    rows: list[Row] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.rows)

    @property
    def no_match(self) -> int:
        return sum(r.match == "none" for r in self.rows)

    @property
    def down(self) -> int:
        return sum(r.vote == "down" for r in self.rows)

    @property
    def last(self) -> float:
        return max(r.updated for r in self.rows)

    @property
    def named(self) -> list[dict]:
        """The entries people named as the right one, most named first."""
        counts = Counter(json.dumps(r.right, sort_keys=True) for r in self.rows if r.right)
        return [json.loads(k) for k, _ in counts.most_common()]

    @property
    def latest(self) -> Row:
        return max(self.rows, key=lambda r: r.updated)

    @property
    def true_gap(self) -> bool:
        """Nothing was found and nobody named an entry: the knowledge base lacks the answer."""
        return not self.named and all(r.match == "none" for r in self.rows)

    def as_json(self) -> dict:
        return {
            "signature": self.signature,
            "label": self.label,
            "count": self.count,
            "no_match": self.no_match,
            "down": self.down,
            "langs": sorted({r.lang for r in self.rows}),
            "doors": sorted({r.door for r in self.rows}),
            "last": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.last)),
            "named": self.named,
            "comments": [r.comment for r in self.rows if r.comment],
            "example": self.latest.query[:500],
            "ids": [r.id for r in self.rows],
        }


def groups(rows: Iterable[Row]) -> list[Group]:
    """The queue's rows grouped by signature, the largest and then the most recent first."""
    by_key: dict[str, Group] = {}
    for r in rows:
        if r.in_queue:
            by_key.setdefault(r.signature, Group(r.signature, r.label)).rows.append(r)
    return sorted(by_key.values(), key=lambda g: (-g.count, -g.last))


def _expected(entry: dict) -> dict:
    # The line makes it found while the entry stays put; the title while its lines move.
    return {"doc": entry["doc"], "line": entry["start_line"], "title": entry["title"]}


def _gold_json(row_id: str, rows: list[Row], expected: list[dict]) -> dict:
    """Rows of one signature as a row of the project's gold format (evaluation/gold.py)."""
    from index.post import read_post

    latest = max(rows, key=lambda r: r.updated)
    post = read_post(latest.query[:MAX_SIGNATURE_CHARS])
    return {
        "id": row_id,
        "query": latest.query,
        # The question's language (kb eval files rows under it), not the answer's a door showed.
        "lang": post.lang if post.lang in ("zh", "en") else latest.lang,
        "kind": "log" if post.is_log else "question",
        "expected": expected,
        "count": len(rows),
        "comments": [r.comment for r in rows if r.comment][:5],
    }


def gold_row(group: Group) -> dict | None:
    """A queue group as a gold row, or None when its right answer is unknown (a thumbs-down on
    an entry, and nobody said which one was right)."""
    if not group.named and not group.true_gap:
        return None
    row = _gold_json(f"feedback-{group.signature}", group.rows, [_expected(e) for e in group.named])
    if not group.named:
        # A "no match" nobody voted on: what the search said, not what a person checked. As a
        # precedent it would teach the index to turn such posts away (kb/precedents.py).
        row["checked"] = False
    return row


def confirmed_expected(voted: list[Row]) -> list[dict] | None:
    """What thumbs-up votes on one error say answers it: the entry their answers showed first,
    or nothing (a thumbs-up on "no match"), whichever most votes confirmed (a tie: the first
    confirmed). None when no vote says (an answer that showed no entry)."""
    votes: Counter = Counter()
    for r in voted:
        if r.match == "none":
            votes["none"] += 1
        elif r.shown:
            votes[json.dumps(_expected(r.shown[0]), sort_keys=True)] += 1
    if not votes:
        return None
    key = votes.most_common(1)[0][0]
    return [] if key == "none" else [json.loads(key)]


@dataclass
class Export:
    """Gold rows from the feedback store, and what was left out."""

    rows: list[dict] = field(default_factory=list)
    confirmed: int = 0  # of the rows, those from thumbs-up votes
    unknown: int = 0  # queue groups with a thumbs-down and no named entry: the answer is unknown
    disputed: int = 0  # errors confirmed with a thumbs-up that a thumbs-down contradicts

    def add_confirmed(self, signature: str, voted: list[Row], expected: list[dict]) -> None:
        self.rows.append(_gold_json(f"feedback-up-{signature}", voted, expected))
        self.confirmed += 1


def export_rows(rows: Iterable[Row], confirmed: bool = False) -> Export:
    """The queue as gold rows; with `confirmed`, the thumbs-up votes too, grouped by signature as
    the queue is. Where both speak of one error:
    - the queue holds only "no match" answers nobody voted on: the thumbs-up is what a person
      said, so its row is written instead of the gap (the same rows whenever an ask was followed
      by a vote on it, from the terminal, the API or MCP);
    - a thumbs-down named the entry the thumbs-up confirmed: they agree, the queue's row is written;
    - otherwise they disagree: the queue's row is written (or left out, if unknown) and the
      thumbs-up is counted as disputed."""
    rows = list(rows)
    ups: dict[str, list[Row]] = {}
    if confirmed:
        for r in rows:
            if r.vote == "up":
                ups.setdefault(r.signature, []).append(r)
    out = Export()
    for g in groups(rows):
        voted = ups.pop(g.signature, [])
        expected = confirmed_expected(voted) if voted else None
        if expected is not None and not g.down:
            out.add_confirmed(g.signature, voted, expected)
            continue
        if expected is not None and expected != [_expected(e) for e in g.named]:
            out.disputed += 1
        row = gold_row(g)
        if row is None:
            out.unknown += 1
        else:
            out.rows.append(row)
    for sig, voted in ups.items():
        expected = confirmed_expected(voted)
        if expected is not None:
            out.add_confirmed(sig, voted, expected)
    return out


def write_rows(out: list[dict], path: str | Path) -> None:
    """Gold rows as JSONL that `kb eval` and `eval/fit.py --gold` read."""
    meta = {"meta": {"name": "feedback " + time.strftime("%Y-%m-%d")}}
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in [meta, *out]) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def has_words(query: str) -> bool:
    """Mostly words: not a binary file's bytes, emoji or punctuation (which filled the queue)."""
    sample = query[:4000]
    words = re.findall(r"[A-Za-z]\w+|[\u3400-\u9fff]", sample)  # `E1234` is a word
    wordy = sum(c.isalpha() or c.isspace() or c.isdigit() for c in sample)
    return bool(words) and wordy >= 0.4 * len(sample)  # real posts: 0.66 and up
