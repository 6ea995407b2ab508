"""Fitting the ranking model and the gate (index/ranker.py applies them): eval/fit.py and
`kb eval`'s cross-validation call these. Kept apart from the runtime, as is scipy, which only
fitting needs (the `eval` extra).
"""

from __future__ import annotations

import numpy as np

from index.ranker import Linear, softmax_by_group
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

    res = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B")
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

    res = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B")
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
