"""Precedents in a fit (index/precedents.py): each real post's `precedent` column comes from the
other real posts the fit may see, never from itself.

The model for an index with precedents learns the feature from its training posts, each given
the other training posts as precedents (leave one out); held out, a fold's posts get all its
training posts as precedents: what a team has when the posts it answered before are its
precedents. The unanswerable posts among them are the gaps, from which each post gets its lead
towards a gap (Candidates.gap). Our own sets and the one-document searches keep 0 (no precedents).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from index.labels import answering
from index.precedents import Precedents, precedent_text


def answers_of(row, index) -> frozenset[int]:
    """The entries of `index` (a LoadedIndex) that answer a labelled row, with their translations."""
    return answering(index.entries, index.by_id, row.expected)


def _text(example) -> str:
    return precedent_text(example.candidates.views)


def with_precedents(examples: Sequence, pool: Sequence) -> list:
    """`examples` with their precedent column and gap lead from the posts of `pool` (Examples
    with a vector) searched in the same index, leaving out each example's own post: those with
    answers there are precedents, the unanswerable ones gaps (unless nobody checked them).
    Examples without a vector (not a real post) are returned as they are."""
    by_index: dict[int, list] = {}
    for p in pool:
        if p.vector is not None and (p.answers or (not p.row.answerable and p.row.checked)):
            by_index.setdefault(id(p.searcher), []).append(p)
    out = []
    for ex in examples:
        if ex.vector is None:
            out.append(ex)
            continue
        others = [p for p in by_index.get(id(ex.searcher), []) if p.row.id != ex.row.id]
        answered = [p for p in others if p.answers]
        gaps = [p for p in others if not p.answers]
        prec = Precedents.of(
            [p.vector for p in answered],
            [p.answers for p in answered],
            [p.vector for p in gaps],
            [_text(p) for p in answered],
            [_text(p) for p in gaps],
        )
        index, idx = ex.searcher.index, ex.candidates.entries
        x = ex.candidates.x.copy()
        names = ex.candidates.names
        x[:, names.index("precedent")] = prec.column(ex.vector, idx, index.entries, index.by_id)
        x[:, names.index("precedent_words")] = prec.words_column(_text(ex), idx, index.entries, index.by_id)
        candidates = dataclasses.replace(ex.candidates, x=x, gap=prec.gap(ex.vector))
        out.append(dataclasses.replace(ex, candidates=candidates))
    return out
