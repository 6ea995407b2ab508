"""Fitting the ranking model and the gate (index/ranker.py applies them): eval/fit.py and
`kb eval`'s cross-validation call these. Kept apart from the runtime, as is scipy, which only
fitting needs (the `eval` extra).
"""

from __future__ import annotations

import numpy as np

from index.ranker import Linear, softmax_by_group
from index.trees import LEAF, Trees
from kb.errors import KbError


def _minimize():
    try:
        from scipy.optimize import minimize
    except ImportError as e:
        raise KbError("fitting the ranking model needs scipy: pip install 'bilingual-kb[eval]'") from e
    return minimize


def _standardise(x: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    mean = np.average(x, axis=0, weights=weights)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=weights))
    scale[scale < 1e-6] = 1.0
    return mean, scale


def fit_rank(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    features: tuple[str, ...],
    group_weight: np.ndarray | None = None,
    l2: float = 1.0,
) -> Linear:
    """Listwise softmax regression: maximise, per group (a post), the probability mass the
    softmax over its candidates puts on its positive candidates. Groups without a positive
    candidate carry no ranking signal and are dropped."""
    minimize = _minimize()

    has_pos = np.bincount(groups, weights=y.astype(float)) > 0
    keep = has_pos[groups]
    x, y, groups = x[keep], y[keep].astype(float), groups[keep]
    _, groups = np.unique(groups, return_inverse=True)
    gw = np.ones(groups.max() + 1) if group_weight is None else np.asarray(group_weight)[has_pos]
    mean, scale = _standardise(x)
    z = (x - mean) / scale
    n_groups = groups.max() + 1

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        p = softmax_by_group(z @ w, groups)
        pos_mass = np.bincount(groups, weights=p * y, minlength=n_groups)
        nll = -np.sum(gw * np.log(np.maximum(pos_mass, 1e-12)))
        # d(-log sum_pos p)/ds_i = p_i - y_i p_i / pos_mass
        r = y * p / np.maximum(pos_mass[groups], 1e-12)
        grad_s = (p - r) * gw[groups]
        total = gw.sum()
        return (nll + l2 * w @ w) / total, (z.T @ grad_s + 2 * l2 * w) / total

    w0 = np.zeros(z.shape[1])
    res = minimize(loss, w0, jac=True, method="L-BFGS-B")
    return Linear(features, mean, scale, res.x)


def fit_gate(
    x: np.ndarray,
    y: np.ndarray,
    features: tuple[str, ...],
    sample_weight: np.ndarray | None = None,
    l2: float = 1.0,
) -> Linear:
    """L2-regularised logistic regression: P(the top answer is right | what the ranking saw)."""
    minimize = _minimize()

    sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    mean, scale = _standardise(x, sw)
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    y = y.astype(float)

    def loss(wb: np.ndarray) -> tuple[float, np.ndarray]:
        s = z @ wb
        p = 1.0 / (1.0 + np.exp(-s))
        ll = sw * (np.logaddexp(0, s) - y * s)
        reg = l2 * wb[:-1] @ wb[:-1]
        g = z.T @ (sw * (p - y))
        g[:-1] += 2 * l2 * wb[:-1]
        return (ll.sum() + reg) / sw.sum(), g / sw.sum()

    res = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B", bounds=gate_bounds(features))
    return Linear(features, mean, scale, res.x[:-1], float(res.x[-1]))


def fit_small_index(
    x: np.ndarray,
    logit: np.ndarray,
    small: np.ndarray,
    y: np.ndarray,
    features: tuple[str, ...],
    sample_weight: np.ndarray,
    l2: float = 1.0,
) -> Linear:
    """The gate of a small index (index/ranker.py RankModel.small): its logit is blended with the
    gate's `logit` by smallness s, (1 - s) logit + s (w . x + b), and w, b are fitted by an
    L2-regularised logistic regression with the gate's share as offset, over searches in
    indexes of smallness s > 0."""
    minimize = _minimize()

    sw = np.asarray(sample_weight, dtype=float)
    mean, scale = _standardise(x, sw)
    z = small[:, None] * np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    offset = (1.0 - small) * logit
    y = y.astype(float)

    def loss(wb: np.ndarray) -> tuple[float, np.ndarray]:
        s = offset + z @ wb
        p = 1.0 / (1.0 + np.exp(-s))
        ll = sw * (np.logaddexp(0, s) - y * s)
        g = z.T @ (sw * (p - y))
        g[:-1] += 2 * l2 * wb[:-1]
        return (ll.sum() + l2 * wb[:-1] @ wb[:-1]) / sw.sum(), g / sw.sum()

    res = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B", bounds=gate_bounds(features))
    return Linear(features, mean, scale, res.x[:-1], float(res.x[-1]))


def pick_confident(conf: np.ndarray, right: np.ndarray, precision: float) -> float:
    """The lowest gate probability from which at least `precision` of the top answers are right
    (over answerable queries), so that an answer shown as a match is one more often than not."""
    order = np.argsort(-conf)
    hits = np.cumsum(right[order]) / np.arange(1, len(order) + 1)
    ok = np.nonzero(hits >= precision)[0]
    if len(ok) == 0:
        return 1.0
    # the last rank down to which the running precision still holds
    return float(conf[order][ok[-1]])


def pick_unshared_floor(dense_right: np.ndarray) -> float:
    """Just below the least cosine of the right answers that share no word with their short
    query (index/gate.py shares_no_word): none of those is turned away, and anything further
    in meaning is; 0 (no floor) when the fit has none."""
    # 1e-6 below: the model file keeps 6 decimals, and rounding must not lift it above that cosine
    return float(dense_right.min() - 1e-6) if len(dense_right) else 0.0


def pick_threshold(
    conf_answerable: np.ndarray, conf_unanswerable: np.ndarray, max_false_abstention: float
) -> float:
    """The highest threshold that turns away at most `max_false_abstention` of the answerable
    posts (so the most unanswerable ones are turned away under that budget)."""
    if len(conf_answerable) == 0:
        return 0.5
    s = np.sort(conf_answerable)
    allowed = int(np.floor(max_false_abstention * len(s)))
    # Turning away the `allowed` least confident answerable posts: the threshold sits just above them.
    t = s[allowed] if allowed < len(s) else s[-1]
    return float(np.nextafter(t, -np.inf)) if allowed == 0 else float((s[allowed - 1] + t) / 2)


# Evidence about the entry alone (its length, its form) is left to the linear model: trees
# over it learn which entries of the training corpus posts ask about, which a team's own FAQ
# does not share (index/trees.py).
TREES_LEAVE_OUT = ("entry_lines", "entry_has_signatures", "entry_is_question", "entry_is_section")
# Chosen by cross-validation on the real posts, by post and by answer document (index/trees.py).
TREE_PARAMS = {"num_leaves": 15, "min_child_samples": 10, "n_estimators": 300, "learning_rate": 0.03}
# More of the evidence that an entry answers the post never lowers the trees' share of its
# score, and more of the evidence against it never raises it: the trees may bend the linear
# model's slopes, not turn them round. Left free, they took points off an entry whose whole title
# the post names (a Chinese question inside an issue-template post fell from first to third,
# tests/test_search.py). Measured in index/trees.py. The gates' weights keep the same signs
# (gate_bounds), with the ranking's own view of its top answer (score, lead, mass) and what the
# post names that the entry lacks (index/gate.py) added.
RISE_WITH = frozenset(
    "dense_max dense_title_view dense_prose_view dense_error_view dense_mean dense_to_title "
    "dense_to_signature dense_to_answer dense_rank bm25_rel bm25_abs bm25_known lexical_rank "
    "title_coverage title_view_coverage query_coverage signature_overlap code_match product_match "
    "symptom_match symptom_title_match top_score margin top_prob main_coverage error_coverage".split()
)
FALL_WITH = frozenset(
    "code_conflict product_conflict symptom_title_conflict "
    "known_rare_missing known_missing_share unknown_share".split()
)


def monotone_constraints(features: tuple[str, ...]) -> list[int]:
    """LightGBM's monotone_constraints for these features: 1 rises with, -1 falls with, 0 free."""
    return [1 if f in RISE_WITH else -1 if f in FALL_WITH else 0 for f in features]


def gate_bounds(features: tuple[str, ...]) -> list[tuple[float | None, float | None]]:
    """L-BFGS-B bounds for a gate's weights over these features and its bias (free): evidence
    for the top answer never lowers its probability, evidence against it never raises it.
    Left free, the gate gave a top answer more confidence the more of the post's known words it
    lacked (known_missing_share, collinear with main_coverage), and `../../../../etc/passwd`, a
    query no entry shares a word with, was shown a closest entry (tests/test_reliability_queries.py).
    Real posts, 5 folds x 3 splits: Hit@5 0.827 -> 0.830, answerable turned away 0.031 -> 0.025,
    unanswerable shown as a match 0.137 -> 0.127, matches that are right 0.791 -> 0.802; in
    one-document indexes the right entry is a match for 0.505 -> 0.484 of the posts it answers."""
    sign = monotone_constraints(features)
    return [(0.0, None) if s > 0 else (None, 0.0) if s < 0 else (None, None) for s in sign] + [(None, None)]


def fit_rank_trees(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    features: tuple[str, ...],
    base: np.ndarray,
    group_weight: np.ndarray | None = None,
    seed: int = 0,
) -> Trees:
    """Boosted regression trees on the ranking's residual: LightGBM's lambdarank over each
    post's candidates, starting from the linear model's scores `base` (index/trees.py).
    Groups without a positive candidate are dropped, as in fit_rank."""
    try:
        import lightgbm
    except ImportError as e:
        raise KbError("fitting the ranking model needs lightgbm: pip install 'bilingual-kb[eval]'") from e

    has_pos = np.bincount(groups, weights=y.astype(float)) > 0
    cols = [i for i, f in enumerate(features) if f not in TREES_LEAVE_OUT]
    kept = tuple(features[i] for i in cols)
    if not has_pos.any():  # nothing to learn: no trees
        return Trees.from_nodes(kept, [], 0)
    keep = has_pos[groups]
    _, groups = np.unique(groups[keep], return_inverse=True)
    gw = np.ones(groups.max() + 1) if group_weight is None else np.asarray(group_weight)[has_pos]
    sizes = np.bincount(groups)
    ranker = tree_ranker(lightgbm, seed, monotone_constraints(kept))
    ranker.fit(
        x[keep][:, cols],
        y[keep].astype(int),
        group=sizes,
        sample_weight=np.repeat(gw, sizes),
        init_score=base[keep],
    )
    dumped = ranker.booster_.dump_model()["tree_info"]
    nodes = [_flatten(t["tree_structure"]) for t in dumped]
    return Trees.from_nodes(kept, nodes, max(_depth(t["tree_structure"]) for t in dumped))


def tree_ranker(lightgbm, seed: int = 0, monotone: list[int] | None = None):
    """The LightGBM ranker fit_rank_trees fits (lambdarank scored on the first ten places, as
    Hit@1 and Hit@5 are; rows and features subsampled; the same trees on every run), with the
    features' monotone constraints when given."""
    constraints = {"monotone_constraints": monotone, "monotone_constraints_method": "intermediate"}
    params = {
        **(constraints if any(monotone or ()) else {}),
        "objective": "lambdarank",
        "lambdarank_truncation_level": 10,
        "subsample": 0.8,
        "subsample_freq": 1,
        "colsample_bytree": 0.8,
        "random_state": seed,
        "deterministic": True,
        "force_row_wise": True,
        "verbose": -1,
    }
    # TREE_PARAMS last, so that eval/screen.py --tree-param can change any of these.
    return lightgbm.LGBMRanker(**{**params, **TREE_PARAMS})


def _flatten(root: dict) -> dict:
    """One LightGBM tree as node lists, root first (index/trees.py Trees.from_nodes)."""
    out: dict[str, list] = {"feature": [], "threshold": [], "left": [], "right": [], "value": []}

    def add(node: dict) -> int:
        i = len(out["feature"])
        for key in out:
            out[key].append(0)
        if "leaf_value" in node:
            out["feature"][i], out["value"][i] = LEAF, node["leaf_value"]
            return i
        if node["decision_type"] != "<=":
            raise KbError(f"a LightGBM split of kind {node['decision_type']!r} cannot be evaluated here")
        out["feature"][i], out["threshold"][i] = node["split_feature"], node["threshold"]
        out["left"][i] = add(node["left_child"])
        out["right"][i] = add(node["right_child"])
        return i

    add(root)
    return out


def _depth(node: dict) -> int:
    if "leaf_value" in node:
        return 0
    return 1 + max(_depth(node["left_child"]), _depth(node["right_child"]))
