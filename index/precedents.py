"""Posts answered before: a labelled post that reads like this one is evidence for its entry.

People paste the same trouble again and again: three posts of the real set say `Duplicate GPU
detected`, several ask for passwordless ssh between nodes in different words. The entry that
answered the earlier post is the likeliest answer to the new one, and often for reasons the
entry's own text does not show (its cause is in the other language, its title is terse). So an
index can be given precedents: posts with the entry that answers them (a team's solved tickets,
`kb feedback export --gold FILE --confirmed`, or the real posts themselves), and each candidate
gets the feature `precedent`: the best cosine between this post and a precedent it (or its
translation) answered, 0 when none did. The ranking model weighs it like any other evidence.

Measured with 5-fold cross-validation over 3 splits on ../shared/eval/real_dev.jsonl (eval/fit.py,
eval/results/fit.md), each held-out post having the posts of the other folds as precedents (about
110: what a team has after answering those), ranked by the model fitted with precedents against
the one without, on the same folds: Hit@1 0.635 -> 0.734, Hit@5 0.815 -> 0.849, MRR@10 0.720 ->
0.787, ranking Hit@1 before the gate 0.650 -> 0.758; unanswerable posts turned away 0.000 ->
0.077, answerable ones 0.046 -> 0.049 (its gate's budget: evaluation/crossval.py
PRECEDENTED_POSTS_BUDGET), but unanswerable posts shown a match 0.148 -> 0.186 (an unanswerable
post can read like an answered one). An index without precedents is ranked as before. A
popularity count instead (how many earlier posts an entry answered, whatever they said) gave
Hit@1 +0.012 (one split): what counts is that the earlier post reads like this one.

Tried and not kept (stop 40): the posts nothing answers as precedents too (rows with `expected:
[]`), the gate reading how much closer a post reads to the nearest of them than to the nearest
answered post (0 when it is closer to an answered one). The signal is there: of the 31
unanswerable real posts, 18 have an unanswerable post as their nearest other post (22% of the
posts are unanswerable), and the lead separates unanswerable posts with AUC 0.80 (the gate's:
0.635). Held out as above, budget 0.02, the other folds' unanswerable posts as the gaps (fold
means to three places, so the 0.734 above reads 0.733): Hit@1 0.733 -> 0.746, Hit@5 0.848 ->
0.870, "no match" on unanswerable posts 0.077 -> 0.104, answerable turned away 0.049 -> 0.028,
unanswerable shown a match 0.186 -> 0.124, matches right 0.804 -> 0.844. But the same model on an
index given precedents and no gaps showed 0.280 of the unanswerable posts a match and turned none
away. Keeping it needs a gate of its own for indexes with gaps (the ranking is the same, so it
can share it), and a feedback export that tells a gap someone checked from a "no match" nobody
did (kb/unanswered.py writes every unvoted "no match" with `expected: []`).

What is compared is the post as the reader keeps it (title, the person's words, the main error
lines: features.post_views), one vector per post, so a precedent costs one embedding when it is
loaded and a query one more embedding when the index has any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ingest.entry import Entry

from .features import View

PRECEDENT_CHARS = 2000  # of a post's kept views, embedded as one text
# From this many precedent posts an index is ranked by the model fitted with precedents; below,
# by the model without (index/ranker.py RankModel.with_precedents). That model learns that an
# entry nobody asked about is less likely, which holds only once many have been asked: held out
# (one split of 5 folds; about 110 posts of the other folds, of which a share was kept), Hit@1
# without precedents 0.639; with 0, 11, 28, 55 and 110 posts 0.574, 0.583, 0.667, 0.704, 0.704.
MIN_POSTS = 25


def precedent_text(views: Sequence[View]) -> str:
    """What of a post is compared with earlier posts: the views the reader kept, as one text."""
    return "\n".join(v.text for v in views)[:PRECEDENT_CHARS]


@dataclass(frozen=True)
class Precedents:
    """Earlier posts of one index: their vectors, and the entry that answered each."""

    vectors: np.ndarray  # (n, dim) L2-normalised, as the embedder embeds queries
    entries: np.ndarray  # (n,) the answering entry's position in the index
    posts: int = 0  # how many posts (a post answered by two entries is two rows)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def enough(self) -> bool:
        """Whether there are enough to rank by the model fitted with precedents (MIN_POSTS)."""
        return self.posts >= MIN_POSTS

    @classmethod
    def empty(cls, dim: int = 0) -> Precedents:
        return cls(np.zeros((0, dim), dtype=np.float32), np.zeros(0, dtype=np.int64))

    @classmethod
    def of(cls, vectors: Sequence[np.ndarray], answers: Sequence[frozenset[int]]) -> Precedents:
        """Posts by their vectors and the entries that answer each (one row per entry)."""
        rows = [(k, e) for k, found in enumerate(answers) for e in sorted(found)]
        if not rows:
            return cls.empty()
        return cls(
            np.asarray(np.vstack(vectors), dtype=np.float32)[[k for k, _ in rows]],
            np.array([e for _, e in rows], dtype=np.int64),
            posts=len(vectors),
        )

    def column(
        self, post_vector: np.ndarray | None, idx: np.ndarray, entries: Sequence[Entry], by_id: dict
    ) -> np.ndarray:
        """Per candidate in `idx`: the best cosine between the post and a precedent that the
        candidate or its translation answered; 0 when none did (or there are no precedents)."""
        out = np.zeros(len(idx), dtype=np.float32)
        if post_vector is None or not len(self):
            return out
        sims = self.vectors @ np.asarray(post_vector, dtype=np.float32)
        best: dict[int, float] = {}
        for e, s in zip(self.entries.tolist(), sims.tolist(), strict=True):
            best[e] = max(best.get(e, -1.0), s)
        for r, i in enumerate(int(i) for i in idx):
            t = entries[i].translation
            j = by_id.get(t) if t else None
            s = max(best.get(i, 0.0), best.get(j, 0.0) if j is not None else 0.0)
            out[r] = max(s, 0.0)
        return out
