"""Regression trees on the linear ranking's residual: numpy evaluates what LightGBM fitted, they
learn an interaction the linear model cannot, and a model file keeps them."""

import json

import numpy as np
import pytest

from evaluation.fitting import RISE_WITH, TREES_LEAVE_OUT, fit_rank, fit_rank_trees, tree_ranker
from index.ranker import Boosted, Linear, ModelError, RankModel, load_model
from index.trees import LEAF, Trees


def _posts(n: int, seed: int):
    """Ten candidates per post; the answer is the one where both `a` and `b` are high (an AND
    a weighted sum cannot tell apart from one where only one is very high)."""
    rng = np.random.default_rng(seed)
    xs, ys, groups = [], [], []
    for g in range(n):
        x = rng.random((10, 3))
        x[:5, 0] += 0.6  # five decoys high in a alone
        x[5:9, 1] += 0.6  # four decoys high in b alone
        x[9, :2] = 0.75  # the answer: both moderately high
        order = rng.permutation(10)
        x = x[order]
        y = order == 9
        xs.append(x), ys.append(y), groups.append(np.full(10, g))
    return np.vstack(xs), np.concatenate(ys), np.concatenate(groups)


def _top_right(scores, y, groups):
    return np.mean([y[groups == g][np.argmax(scores[groups == g])] for g in np.unique(groups)])


def test_trees_learn_what_the_linear_ranking_cannot_and_numpy_scores_as_lightgbm_would():
    names = ("a", "b", "noise")
    x, y, groups = _posts(300, 0)
    linear = fit_rank(x, y, groups, names)
    trees = fit_rank_trees(x, y, groups, names, linear(x))
    model = Boosted(linear, trees)
    xt, yt, gt = _posts(200, 1)
    assert _top_right(linear(xt), yt, gt) < 0.5
    assert _top_right(model(xt), yt, gt) > 0.9

    import lightgbm

    # the same trees through LightGBM's own predict, from a booster rebuilt from our copy
    booster = lightgbm.Booster(model_str=_model_string(x, y, groups, linear))
    ours = fit_rank_trees(x, y, groups, names, linear(x))
    assert ours(xt) == pytest.approx(booster.predict(xt), abs=1e-6)


def _model_string(x, y, groups, linear) -> str:
    """LightGBM fitted as fit_rank_trees fits it, as its own text model."""
    import lightgbm

    r = tree_ranker(lightgbm)
    r.fit(x, y.astype(int), group=np.bincount(groups), sample_weight=np.ones(len(x)), init_score=linear(x))
    return r.booster_.model_to_string()


def test_entry_only_evidence_stays_with_the_linear_model():
    names = ("a", "b", "entry_lines")
    x, y, groups = _posts(100, 2)
    trees = fit_rank_trees(x, y, groups, names, np.zeros(len(x)))
    assert "entry_lines" in TREES_LEAVE_OUT and trees.features == ("a", "b")


def test_trees_never_take_points_off_more_evidence_for_an_entry():
    # The answer is the candidate whose title_coverage is middling; where the posts' candidates
    # with full coverage are decoys, free trees learn to lower full coverage, constrained ones not.
    rng = np.random.default_rng(3)
    xs, ys, groups = [], [], []
    for g in range(200):
        x = rng.random((8, 2)) * 0.3
        x[:3, 0] = 1.0  # decoys that name the whole title
        x[7, 0] = 0.6  # the answer
        xs.append(x), ys.append(np.arange(8) == 7), groups.append(np.full(8, g))
    x, y, groups = np.vstack(xs), np.concatenate(ys), np.concatenate(groups)
    names = ("title_coverage", "noise")
    assert "title_coverage" in RISE_WITH
    trees = fit_rank_trees(x, y, groups, names, np.zeros(len(x)))
    grid = np.column_stack([np.linspace(0, 1, 21), np.full(21, 0.15)])
    assert np.all(np.diff(trees(grid)) >= -1e-12)
    free = fit_rank_trees(x, y, groups, ("coverage_unconstrained", "noise"), np.zeros(len(x)))
    assert free(grid[-1:])[0] < free(grid[12:13])[0]  # the premise: the data teach the reverse


def test_a_hand_made_tree_sends_rows_left_at_or_below_the_threshold():
    # root: a <= 0.5 ? leaf 1.0 : (b <= 2 ? leaf 2.0 : leaf 3.0); a second tree adds 10 everywhere
    trees = Trees.from_nodes(
        ("a", "b"),
        [
            {
                "feature": [0, LEAF, 1, LEAF, LEAF],
                "threshold": [0.5, 0, 2.0, 0, 0],
                "left": [1, 0, 3, 0, 0],
                "right": [2, 0, 4, 0, 0],
                "value": [0, 1.0, 0, 2.0, 3.0],
            },
            {"feature": [LEAF], "threshold": [0], "left": [0], "right": [0], "value": [10.0]},
        ],
        depth=2,
    )
    x = np.array([[0.5, 9.0], [0.6, 2.0], [0.6, 2.1], [np.nan, 9.0]])
    assert trees(x).tolist() == [11.0, 12.0, 13.0, 11.0]
    assert Trees.from_dict(json.loads(json.dumps(trees.to_dict())))(x).tolist() == [11.0, 12.0, 13.0, 11.0]


def test_a_model_file_with_trees_round_trips_and_names_what_it_misses(tmp_path):
    names = ("a", "b", "noise")
    x, y, groups = _posts(100, 3)
    linear = fit_rank(x, y, groups, names)
    rank = Boosted(linear, fit_rank_trees(x, y, groups, names, linear(x)))
    gate = Linear(("a",), np.zeros(1), np.ones(1), np.ones(1))
    path = tmp_path / "m.json"
    RankModel(rank, gate, {"post": 0.1}).save(path)
    back = load_model(str(path))
    assert isinstance(back.rank, Boosted)
    assert back.rank(x) == pytest.approx(rank(x))
    # columns come by name, as for the linear model
    shuffled = x[:, [2, 0, 1]]
    assert back.rank(back.rank.select(shuffled, ("noise", "a", "b"))) == pytest.approx(rank(x))
    d = back.rank.to_dict()
    d["trees"]["features"] = ["a", "gone"]
    with pytest.raises(ModelError, match="gone"):
        Boosted.from_dict(d)


def test_posts_without_an_answer_among_their_candidates_teach_no_trees():
    x = np.random.default_rng(4).random((20, 2))
    trees = fit_rank_trees(x, np.zeros(20, dtype=bool), np.repeat([0, 1], 10), ("a", "b"), np.zeros(20))
    assert trees.feature.shape[0] == 0 and trees(x).tolist() == [0.0] * 20
