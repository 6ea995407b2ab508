"""The ranking model and the no-match gate: weights fitted on real posts, not set by hand.

Two small linear models over the evidence of index/features.py:

1. Ranking: score = w . standardised(features). Fitted listwise (a softmax over each post's
   candidates, maximising the probability of the entries that answer it), which is what Hit@1
   asks for; with L2 regularisation, because there are a few hundred labelled posts.
2. The gate: a logistic regression over what the ranking saw for its top answer (its score, its
   lead over the runner-up, its evidence, which parts the post had) giving the probability that
   the top answer is right. Below a threshold the answer is "no match". Each query shape (see
   query_shape) has its threshold: the highest that keeps the answerable queries of that shape
   turned away at or under each set's budget; a wrong answer with a command is worse than
   "no match", but a gate that turns away real questions is not used twice.

eval/fit.py fits both on ../shared/eval/real_dev.jsonl and the project's gold sets with k-fold
cross-validation, and writes the weights with the data they came from to index/models/. The
weights depend on the embedder (cosines of another model sit elsewhere): refit for another one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ingest.errors import KbError

MODELS_DIR = Path(__file__).parent / "models"
DEFAULT_MODEL = "usem3"

GATE_FEATURES = (
    "top_score",
    "margin",
    "top_prob",
    "dense_max",
    "signature_overlap",
    "code_match",
    "code_conflict",
    "query_coverage",
    "title_coverage",
    "bm25_abs",
    "same_lang",
    "has_title",
    "has_prose",
    "has_errors",
    "main_coverage",
    "error_coverage",
    "known_rare_missing",
    "known_missing_share",
    "unknown_share",
    "entry_is_question",
    "entry_is_section",
    "entry_has_signatures",
    "entry_lines",
    "dense_title_view",
    "dense_error_view",
    "dense_mean",
)


@dataclass(frozen=True)
class Linear:
    """w . (x - mean) / scale + bias over named features."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float = 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights + self.bias

    def to_dict(self) -> dict:
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(float(self.bias), 6),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Linear:
        return cls(
            tuple(d["features"]),
            np.asarray(d["mean"], dtype=np.float64),
            np.asarray(d["scale"], dtype=np.float64),
            np.asarray(d["weights"], dtype=np.float64),
            float(d.get("bias", 0.0)),
        )

    def select(self, x: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
        """The model's features, in its order, from a matrix whose columns are `names`."""
        missing = [f for f in self.features if f not in names]
        if missing:
            raise ModelError(
                f"the ranking model needs features the index cannot give ({', '.join(missing)}): "
                "it was fitted for another kind of index; refit it with `python eval/fit.py`"
            )
        return np.asarray(x)[:, [names.index(f) for f in self.features]]


SHAPES = ("post", "short")


def query_shape(title: str, lines: int) -> str:
    """A post (a title line, or three lines or more: what people paste into an issue tracker)
    or a short query (a question or an error line). Their evidence differs: a real post that an
    entry answers often matches it only loosely, while a one-line query that matches loosely is
    mostly about something else. So each shape has its own threshold."""
    return "post" if title or lines >= 3 else "short"


@dataclass(frozen=True)
class RankModel:
    rank: Linear
    gate: Linear
    thresholds: dict[str, float]  # query shape -> the least gate probability that is shown as an answer
    meta: dict = field(default_factory=dict)
    # From this gate probability on, an answer is a match; below it (and above the threshold) it
    # is shown as the closest entry, which may not be the problem, and without its commands.
    confident: float = 0.5

    def threshold(self, shape: str) -> float:
        return self.thresholds.get(shape, min(self.thresholds.values(), default=0.5))

    def confidence(self, gate_rows: np.ndarray) -> np.ndarray:
        """P(the top answer is right) for rows of GATE_FEATURES (in the gate's own order)."""
        return 1.0 / (1.0 + np.exp(-self.gate(np.atleast_2d(gate_rows))))

    def to_dict(self) -> dict:
        return {
            "rank": self.rank.to_dict(),
            "gate": self.gate.to_dict(),
            "thresholds": {k: round(float(v), 6) for k, v in self.thresholds.items()},
            "confident": round(float(self.confident), 6),
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RankModel:
        thresholds = {k: float(v) for k, v in d["thresholds"].items()}
        return cls(
            Linear.from_dict(d["rank"]),
            Linear.from_dict(d["gate"]),
            thresholds,
            d.get("meta", {}),
            float(d.get("confident", 0.5)),
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1) + "\n", "utf-8")


class ModelError(KbError):
    """The ranking model file cannot be used; the message says how to get a good one."""


@lru_cache(maxsize=8)
def load_model(path: str | None = None) -> RankModel:
    """A model file by path, else the one fitted for the default embedder."""
    p = Path(path) if path else MODELS_DIR / f"{DEFAULT_MODEL}.json"
    try:
        return RankModel.from_dict(json.loads(p.read_text("utf-8")))
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(
            f"cannot read the ranking model {p} ({e}); refit it with `python eval/fit.py` "
            "or point `ranker` in kb.toml at a good one"
        ) from e


def softmax_by_group(scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Softmax of scores within each group (groups are consecutive ids 0..g-1)."""
    top = np.full(groups.max() + 1, -np.inf)
    np.maximum.at(top, groups, scores)
    e = np.exp(scores - top[groups])
    total = np.bincount(groups, weights=e)
    return e / total[groups]


# ---- fitting (eval/fit.py and `kb eval` cross-validation call these) -------------------------


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
    from scipy.optimize import minimize

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
    from scipy.optimize import minimize

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
