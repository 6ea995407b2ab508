"""Regression trees added to the linear ranking score (index/ranker.py Boosted).

The linear model weighs each piece of evidence the same way for every post, while a post's
evidence interacts (a code match means more when the product matches too; a title's cosine
less when the post is one long log). Boosted trees fitted on the linear model's residual
(LightGBM's lambdarank, evaluation/fitting.py fit_rank_trees) learn those interactions.

Measured on the real posts (5 folds x 3 splits, entries and gate as shipped): Hit@1 0.563 ->
0.644, Hit@5 0.827 -> 0.827, unanswerable posts shown as a match 0.165 -> 0.137, matches
that are right 0.734 -> 0.791, answerable posts turned away 0.034 -> 0.031. The ranking alone
with folds by answer document instead (no training post answered from the held-out
documents, as on a team's own FAQ): Hit@1 0.454 -> 0.489, Hit@5 0.741 -> 0.743 (trees
without constraints), so most of the gain is learnt about documents the posts ask about, and
the trees do not cost a FAQ they never saw. Size (15 leaves, 300 trees at rate 0.03) chosen
over five settings by both cross-validations: 31 leaves reached 0.657 by post but fell to
0.474 / 0.722 by document. The evidence about the entry alone (its length and form) is left
out of the trees: with it they gained twice as much by post, by learning which entries of
this corpus are asked about.

The trees' share never falls as evidence for an entry grows, nor rises with evidence against
it (evaluation/fitting.py RISE_WITH): left free they took 3.8 points off an entry whose
whole title a Chinese post named, and the answer fell to third. Constrained, the ranking alone
(by post) gained Hit@1 0.635 -> 0.656 and lost Hit@5 0.867 -> 0.833; shipped, Hit@1 0.626 ->
0.644 and Hit@5 0.836 -> 0.827 (corpus posts 0.769 -> 0.741; 0.830 with no trees).

Tried and not kept (stop 42): the mean of five such ensembles fitted on different row and
feature samples (seeds 0-4), to steady what one ensemble learns by chance. Real posts 5 folds x 3
splits, against one ensemble in the same environment: Hit@1 0.635 -> 0.638, Hit@5 0.815 -> 0.821,
answerable posts turned away 0.047 -> 0.034, unanswerable posts turned away 0.000 -> 0.040 but
shown a match 0.148 -> 0.163. Within the spread between folds, for five times the trees at every
query and in the model file (its JSON alone takes 13 ms to read with one ensemble).

Rechecked (stop 69) with today's features, each change alone, paired over the same searches and
the same 3 splits of 5 folds (Hit@1, Hit@5, answerable posts turned away; main 0.650, 0.827,
0.028): 7 leaves 0.632, 0.830, 0.034; 150 trees 0.628, 0.840, 0.031; at least 20 candidates a
leaf 0.647, 0.824, 0.034. The size above stays. Stop 70 screened LightGBM's own guards against
small data the same way (eval/screen.py has the numbers): path_smooth 1 gained Hit@1 0.006,
within the splits' spread (-0.009, +0.018, +0.009), and halved "no match" on unanswerable posts;
path_smooth 5, extra_trees and reg_lambda 5 lost Hit@1 (0.638, 0.628, 0.619). What the trees
read (`--trees-leave-out`, the linear weights reading everything still): without the two ranks and
the three per-view cosines, Hit@1 0.647, Hit@5 0.839, answerable posts turned away 0.021 (main
0.651, 0.827, 0.028), within the spread; without the eight topic columns (index/topics.py), 0.569,
0.805, 0.040, lower on every split: without the product and the kind of trouble, the trees are
near the linear ranking alone (0.563 above, measured then, not again).
Stop 71, the same way, each alone (Hit@1, Hit@5, answerable posts turned away; by split): lambdarank
scored on the first 3 places 0.622, 0.827, 0.037 (0.574, 0.647, 0.647); on the first 5 0.644,
0.821, 0.034; features sampled at 0.5 a tree 0.632, 0.812, 0.037; at least 5 candidates a leaf
0.635, 0.830, 0.028; the "advanced" monotone method 0.638, 0.821, 0.031; monotone_penalty 2 0.647,
0.827, 0.031. None above main on more than one split: the settings above stay.

Only fitting needs LightGBM; here the trees are evaluated with numpy, every tree and every
candidate at once, one tree level per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEAF = -1  # feature index of a leaf


@dataclass(frozen=True)
class Trees:
    """Binary trees over named features, as padded arrays (tree, node). An inner node sends a
    row left when its feature is <= the threshold (NaN is read as 0, as LightGBM reads it when
    it saw none while fitting); a leaf's value is its share of the score."""

    features: tuple[str, ...]
    feature: np.ndarray  # int, LEAF at a leaf
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.nan_to_num(np.atleast_2d(np.asarray(x, dtype=np.float64)), nan=0.0)
        n_trees, width = self.feature.shape
        if n_trees == 0 or len(x) == 0:
            return np.zeros(len(x))
        # Flat indices (tree * width + node) into the raveled arrays: one take per array and
        # level, about three times faster than indexing the 2-D arrays by (tree, node).
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        left, right = self.left.ravel(), self.right.ravel()
        base = (np.arange(n_trees) * width)[:, None]
        cells = x.ravel()
        row = (np.arange(len(x)) * x.shape[1])[None, :]
        at = np.broadcast_to(base, (n_trees, len(x))).copy()
        for _ in range(self.depth):
            f = feature.take(at)
            inner = f != LEAF
            if not inner.any():
                break
            go_left = cells.take(row + np.where(inner, f, 0)) <= threshold.take(at)
            step = base + np.where(go_left, left.take(at), right.take(at))
            at = np.where(inner, step, at)
        return self.value.ravel().take(at).sum(axis=0)

    def to_dict(self) -> dict:
        trees = []
        for t in range(self.feature.shape[0]):
            used = int(np.max(np.nonzero(self.feature[t] != LEAF)[0], initial=-1)) + 1
            used = max(used, int(self.left[t].max()) + 1, int(self.right[t].max()) + 1)
            trees.append(
                {
                    "feature": self.feature[t, :used].tolist(),
                    "threshold": [round(float(v), 9) for v in self.threshold[t, :used]],
                    "left": self.left[t, :used].tolist(),
                    "right": self.right[t, :used].tolist(),
                    "value": [round(float(v), 9) for v in self.value[t, :used]],
                }
            )
        return {"features": list(self.features), "depth": self.depth, "trees": trees}

    @classmethod
    def from_dict(cls, d: dict) -> Trees:
        return cls.from_nodes(tuple(d["features"]), d["trees"], int(d["depth"]))

    @classmethod
    def from_nodes(cls, features: tuple[str, ...], trees: list[dict], depth: int) -> Trees:
        """From one dict of equal-length node lists per tree (feature, threshold, left, right,
        value); node 0 is the root."""
        width = max((len(t["feature"]) for t in trees), default=1)

        def padded(key: str, dtype, fill) -> np.ndarray:
            out = np.full((len(trees), width), fill, dtype=dtype)
            for i, t in enumerate(trees):
                out[i, : len(t[key])] = t[key]
            return out

        return cls(
            features,
            padded("feature", np.int64, LEAF),
            padded("threshold", np.float64, 0.0),
            padded("left", np.int64, 0),
            padded("right", np.int64, 0),
            padded("value", np.float64, 0.0),
            depth,
        )
