"""The ranking model and the no-match gate: weights fitted on real posts, not set by hand.

Small linear models over the evidence of index/features.py:

1. Ranking: score = w . standardised(features). Fitted listwise (a softmax over each post's
   candidates, maximising the probability of the entries that answer it), which is what Hit@1
   asks for; with L2 regularisation, because there are a few hundred labelled posts.
2. Two gates, logistic regressions over what the ranking saw for its top answer (its score, its
   lead over the runner-up, its evidence, which parts the post had). The answered gate gives the
   probability that the index answers the post at all (an entry that does is a candidate);
   below a threshold the answer is "no match". Each query shape (see query_shape) has its
   threshold: the highest that keeps the answerable queries of that shape turned away at or
   under each set's budget; a wrong answer with a command is worse than "no match", but a gate
   that turns away real questions is not used twice. The right gate gives the probability that
   the top answer is the one: from the level where enough of them are right it is a match with
   its commands, below it the closest entry.
3. Each gate's own weights for a small index (fewer than SMALL_INDEX questions), over the same
   features, blended in as the index shrinks, because there the top answer's lead over
   the others says little (a team's FAQ of six entries, not the shared corpus).

evaluation/fitting.py and gate_fit.py fit them: eval/fit.py on ../shared/eval/real_dev.jsonl and
the project's gold sets with k-fold cross-validation, and writes the weights with the data they
came from to index/models/. The weights depend on the embedder (cosines of another model sit elsewhere):
refit for another one.

Why two gates (stop 49; evaluation/gate_fit.py says what each learns): one gate taught "the top
answer is right" turned away answerable posts whose answer came second as it did posts nothing
answers, and one taught "the index answers" for both decisions gave a pip post a match with
commands (stop 48). Real posts, 5 folds x 3, main's two draws (eval/results/fit_spread.md): "no
match" on unanswerable posts 0.000, 0.032 -> 0.036, 0.036; answerable turned away 0.046, 0.034 ->
0.025, 0.037; unanswerable shown a match 0.148, 0.139 -> 0.120, 0.122; Hit@1 within the spread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from index.trees import Trees
from ingest.errors import KbError

MODELS_DIR = Path(__file__).parent / "models"
DEFAULT_MODEL = "usem3"

# The gate of an index with gaps (RankModel.with_gaps) reads these as well: the top entry's
# `precedent` and the post's lead towards a gap (index/precedents.py). Every other gate leaves
# them out: read where there are no gaps, they showed 0.280 of the unanswerable posts a match.
PRECEDENT_GATE = ("precedent", "gap_precedent")
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
    *PRECEDENT_GATE,
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


@dataclass(frozen=True)
class Boosted:
    """The linear ranking score plus regression trees over some of its features (index/trees.py:
    what the trees add, and why)."""

    linear: Linear
    trees: Trees

    @property
    def features(self) -> tuple[str, ...]:
        return self.linear.features

    def __post_init__(self) -> None:
        missing = [f for f in self.trees.features if f not in self.linear.features]
        if missing:
            raise ModelError(
                f"the ranking trees read features the model does not have ({', '.join(missing)})"
            )

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(x)
        cols = [self.linear.features.index(f) for f in self.trees.features]
        return self.linear(x) + self.trees(x[:, cols])

    def select(self, x: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
        return self.linear.select(x, names)

    def to_dict(self) -> dict:
        return {**self.linear.to_dict(), "trees": self.trees.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> Boosted:
        return cls(Linear.from_dict(d), Trees.from_dict(d["trees"]))


def rank_from_dict(d: dict) -> Linear | Boosted:
    """A model file's ranking: linear with trees, or linear alone (a file written before the trees)."""
    return Boosted.from_dict(d) if "trees" in d else Linear.from_dict(d)


# Below this many questions every entry of an index is a candidate (index/search.py CANDIDATES
# from each leg), and the gate's evidence that is relative to the other candidates (the top
# answer's lead, the softmax mass it holds) says less: an index of one question gives it every
# lead there is. See RankModel.small.
SMALL_INDEX = 40


def smallness(questions: int) -> float:
    """0 for an index of SMALL_INDEX questions or more, rising to 1 as it shrinks to none. A
    question in two languages is one (the ranking shows a linked pair once)."""
    return max(0.0, 1.0 - questions / SMALL_INDEX)


SHAPES = ("post", "short")


def query_shape(title: str, lines: int) -> str:
    """A post (a title line, or three lines or more: what people paste into an issue tracker)
    or a short query (a question or an error line). Their evidence differs: a real post that an
    entry answers often matches it only loosely, while a one-line query that matches loosely is
    mostly about something else. So each shape has its own threshold."""
    return "post" if title or lines >= 3 else "short"


@dataclass(frozen=True)
class RankModel:
    rank: Linear | Boosted
    gate: Linear  # the right gate: P(the top answer is right)
    thresholds: dict[str, float]  # query shape -> the least P(answered) that is shown as an answer
    meta: dict = field(default_factory=dict)
    # From this right-gate probability on, an answer is a match; below it (and past the answered
    # gate's threshold) it is shown as the closest entry, which may not be the problem, and
    # without its commands.
    confident: float = 0.5
    # The right gate's correction for a small index, over GATE_FEATURES (answered_small is the
    # answered gate's): the logit is (1 - s) gate + s small, with
    # s = smallness(questions); fitted on real posts searched in one-document indexes
    # (evaluation/subsets.py). An index of SMALL_INDEX questions or more gets the gate alone, as
    # does every index with a model file that has none.
    small: Linear | None = None
    # A short query whose top entry shares no word with it (index/gate.py shares_no_word) is
    # shown that entry only from this cosine on; 0 (no floor) for model files without one.
    unshared_dense: float = 0.0
    # The model of an index given enough precedents (index/precedents.py), fitted with them. One
    # model fitted both with and without them ranked an index without any worse (held out, one
    # split of 5 folds: Hit@1 0.639 -> 0.620, answerable turned away 0.037 -> 0.083). None (a
    # model file from before precedents): every index is ranked by this one.
    with_precedents: RankModel | None = None
    # In the model with precedents: the model of an index given gaps too (posts nothing answers,
    # index/precedents.py). Its ranking is the one it is nested in; its gate reads PRECEDENT_GATE.
    with_gaps: RankModel | None = None
    # The answered gate (P(the index answers the query), over the gate's features) and its small
    # index correction; None (a model file from before stop 49): the thresholds read the right gate.
    answered: Linear | None = None
    answered_small: Linear | None = None

    def for_index(self, has_precedents: bool, has_gaps: bool = False) -> RankModel:
        """The model that ranks an index with (or without) precedents, and gaps."""
        model = self.with_precedents if has_precedents and self.with_precedents is not None else self
        return model.with_gaps if has_gaps and has_precedents and model.with_gaps is not None else model

    def threshold(self, shape: str) -> float:
        return self.thresholds.get(shape, min(self.thresholds.values(), default=0.5))

    def confidence(self, gate_rows: np.ndarray, small: float | np.ndarray = 0.0) -> np.ndarray:
        """P(the top answer is right) for rows of the gate's features (in its order), searched in
        an index of `small` = smallness(questions) (one value, or one per row)."""
        return self._probability(self.gate, self.small, gate_rows, small)

    def answered_probability(self, gate_rows: np.ndarray, small: float | np.ndarray = 0.0) -> np.ndarray:
        """P(the index answers the query), what the thresholds read; as confidence's arguments."""
        if self.answered is None:
            return self.confidence(gate_rows, small)
        return self._probability(self.answered, self.answered_small, gate_rows, small)

    def _probability(self, gate: Linear, correction: Linear | None, gate_rows, small) -> np.ndarray:
        rows = np.atleast_2d(gate_rows)
        z = gate(gate.select(rows, self.gate.features))
        if correction is not None:
            s = np.broadcast_to(np.asarray(small, dtype=np.float64), z.shape)
            z = (1.0 - s) * z + s * correction(correction.select(rows, self.gate.features))
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict:
        return {
            "rank": self.rank.to_dict(),
            "gate": self.gate.to_dict(),
            "thresholds": {k: round(float(v), 6) for k, v in self.thresholds.items()},
            "confident": round(float(self.confident), 6),
            **({"small": self.small.to_dict()} if self.small is not None else {}),
            "unshared_dense": round(float(self.unshared_dense), 6),
            **({"with_precedents": self.with_precedents.to_dict()} if self.with_precedents else {}),
            **({"with_gaps": self._gaps_dict()} if self.with_gaps else {}),
            **({"answered": self.answered.to_dict()} if self.answered is not None else {}),
            **({"answered_small": self.answered_small.to_dict()} if self.answered_small is not None else {}),
            "meta": self.meta,
        }

    def _gaps_dict(self) -> dict:
        """with_gaps without its ranking: it is this model's (one copy of the trees in the file)."""
        gaps = self.with_gaps
        if gaps is None or gaps.rank is not self.rank:
            raise ModelError(
                "with_gaps must rank as the model it is nested in: refit with `python eval/fit.py`"
            )
        return {k: v for k, v in gaps.to_dict().items() if k != "rank"}

    @classmethod
    def from_dict(cls, d: dict, rank: Linear | Boosted | None = None) -> RankModel:
        """rank: the ranking, when the dict has none of its own (with_gaps takes its parent's)."""
        thresholds = {k: float(v) for k, v in d["thresholds"].items()}
        rank = rank_from_dict(d["rank"]) if rank is None else rank
        return cls(
            rank,
            Linear.from_dict(d["gate"]),
            thresholds,
            d.get("meta", {}),
            float(d.get("confident", 0.5)),
            Linear.from_dict(d["small"]) if "small" in d else None,
            float(d.get("unshared_dense", 0.0)),
            cls.from_dict(d["with_precedents"]) if "with_precedents" in d else None,
            cls.from_dict(d["with_gaps"], rank) if "with_gaps" in d else None,
            Linear.from_dict(d["answered"]) if "answered" in d else None,
            Linear.from_dict(d["answered_small"]) if "answered_small" in d else None,
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
