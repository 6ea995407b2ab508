"""How labelled posts are split into cross-validation folds (evaluation/crossval.py).

Folds are stratified, so every fold holds its share of each knowledge base and of the posts
nothing answers, and seeded, so that two fits compared on "the same folds" are.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .gold import GoldRow

if TYPE_CHECKING:
    from .crossval import Example

FOLDS = 5
# Splits of the posts into folds that a cross-validation is repeated over (seeds 0, 1, ...), and
# its numbers are their mean: eval/fit.py's, `kb eval`'s and so the CI floors'. One split moves by
# a post or two whenever any feature moves, because the refitted trees and gates move with it: at
# stop 58 the post reader's `Last error:` change and a variant of it each crossed a CI floor by
# one post in the first split (one under Hit@1, one over answerable posts turned away), while over
# four splits their ranking was where main's was (eval/results/fit_spread.md).
REPEATS = 3


def _strata(rows: Sequence[GoldRow]) -> dict[str, list[str]]:
    """Row ids by what a fold must hold its share of: a real post names its knowledge base; a
    team's own posts are all asked of one index, so they go by whether anything answers them."""
    strata: dict[str, list[str]] = {}
    for r in rows:
        strata.setdefault(r.kb or ("answerable" if r.answerable else "none"), []).append(r.id)
    return strata


def folds_of(rows: Sequence[GoldRow], k: int = FOLDS, seed: int = 0) -> dict[str, int]:
    """Row id -> fold, stratified by knowledge base and answerability so that every fold holds
    its share of each (a row searched in two indexes stays in one fold)."""
    strata = _strata(rows)
    rnd = random.Random(seed)
    out: dict[str, int] = {}
    offset = 0
    for name in sorted(strata):
        ids = sorted(strata[name])
        rnd.shuffle(ids)
        for n, rid in enumerate(ids):
            out[rid] = (n + offset) % k
        offset += len(ids)
    return out


def kept_share(rows: Sequence[GoldRow], share: float, seed: int) -> set[str]:
    """The ids of a seeded `share` of `rows`, taken from each stratum of folds_of in proportion
    (at least one row of a stratum that has any): the posts a team would have labelled had it
    labelled fewer (eval/learning_curve.py)."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"a share of the training posts is in (0, 1], not {share}")
    strata = _strata(rows)
    rnd = random.Random(seed)
    kept: set[str] = set()
    for name in sorted(strata):
        ids = sorted(strata[name])
        rnd.shuffle(ids)
        kept.update(ids[: max(1, round(share * len(ids)))])
    return kept


def folds_by_set(examples: Sequence[Example], k: int = FOLDS, seed: int = 0) -> dict[str, int]:
    """Row id -> fold, each set split on its own: adding a team's posts to the real posts leaves
    the real posts' folds as they were, so the two fits compare."""
    fold_of: dict[str, int] = {}
    for name in dict.fromkeys(ex.set_name for ex in examples):
        fold_of |= folds_of([ex.row for ex in examples if ex.set_name == name], k, seed)
    return fold_of
