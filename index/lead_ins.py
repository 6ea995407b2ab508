"""A section's one-paragraph lead-in gives its place to the entry of its section below it.

FAQ pages introduce a group of entries with a heading and one sentence (`## AICPU算子执行问题`,
"AICPU算子问题错误以`E3`开头。", then `### E39999` ...; ms-swift's `## Evaluation`, then its Q1, Q2).
The parser makes that heading an entry (it has content of its own), and its few words, which name
the whole group, come near most posts about any entry of the group: `AICPU算子执行失败了怎么办` was
answered by the lead-in, the E39999 entry under it second. Of the 44 entries in ../shared with
entries under them, none is a labelled answer of a real post; 21 of them are one paragraph.

So when a lead-in (a single paragraph, no code, list or table) is followed within the next
WINDOW places by an entry of its own section, that entry takes the lead-in's place and score,
and the lead-in comes next (once: it stays above the section's other entries, which name less
of it). The section's words brought the lead-in up; the entry under it is what answers. The
gate still weighs the ranking as scored: it was fitted on it, and whether the post is answered
is the same question whichever of the two comes first. A lead-in none of whose entries is near
it keeps its place (`swift 支持哪些训练方法` is asked of the `训练` lead-in itself), and so does a
parent with more than a paragraph (an overview with a table of causes, a list of the kinds of
output): it answers things of its own.

On the real posts (`kb eval`, 5 folds x 3 splits) every number is the same with and without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ingest.blocks import read_blocks
from ingest.entry import Entry

WINDOW = 4  # the places after a lead-in searched for its section's entries: the rest of a top five

Ranked = tuple[int, int | None, float]  # (shown entry, its translation, score)


def is_under(entry: Entry, section: Entry) -> bool:
    """Whether `entry` sits under the heading of `section`, in the same document."""
    path = (*section.heading_path, section.title)
    return entry.doc == section.doc and entry.heading_path[: len(path)] == path


def is_lead_in(entry: Entry) -> bool:
    """One paragraph and nothing else: what introduces a section rather than answers."""
    return _one_paragraph(entry.body)


@lru_cache(maxsize=4096)  # the same few parents come up post after post
def _one_paragraph(body: str) -> bool:
    blocks = [b for b in read_blocks(body) if b.kind != "hr"]
    return len(blocks) == 1 and blocks[0].kind == "paragraph"


def sections_first(ranked: list[Ranked], entries: Sequence[Entry]) -> list[Ranked]:
    """The ranking with the first of a lead-in's entries among the next WINDOW places moved up
    to just before it."""
    out = list(ranked)
    members = [[entries[m] for m in r[:2] if m is not None] for r in out]
    moved: set[int] = set()
    p = 0
    while p < len(out):
        q = None if out[p][0] in moved else _first_of_section(members, p)
        if q is None:
            p += 1
            continue
        shown, other, _ = out.pop(q)
        out.insert(p, (shown, other, out[p][2]))
        members.insert(p, members.pop(q))
        moved.add(out[p + 1][0])
    return out


def _first_of_section(members: list[list[Entry]], p: int) -> int | None:
    """Where the first entry under the lead-in at `p` is among the next WINDOW places, if the
    entry at `p` is a lead-in and one is."""
    lead = members[p]
    docs = {s.doc for s in lead}
    for q in range(p + 1, min(p + 1 + WINDOW, len(members))):
        if any(e.doc in docs and is_under(e, s) for e in members[q] for s in lead):
            return q if any(is_lead_in(s) for s in lead) else None
    return None
