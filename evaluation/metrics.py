"""Judging one outcome against its gold row, and the metrics of a set.

Metrics, per set and per group (kind, language direction, knowledge base): Hit@1, Hit@5, MRR@k
and nDCG@k (binary gains) over answerable queries, where a no_match answer counts as a miss;
abstention (share of unanswerable queries answered no_match); false abstention (share of
answerable ones answered no_match); the ranking's own Hit@1 as if every query were answered
(tells gate misses from rank misses); latency median/p95.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ingest.entry import Entry

from .gold import GoldRow, entry_matches
from .stats import percentile

HIT5 = 5  # Hit@5 is reported whatever --k is
# The share of answerable queries issue 11 lets the no-match gate turn away: gate_separation
# reads how many unanswerable ones the best threshold within it would turn away.
TURNED_AWAY_ALLOWED = 0.05


@dataclass(frozen=True)
class Shown:
    """One ranked answer as the user sees it: the entry and its linked translation."""

    entry: Entry
    translation: Entry | None = None


@dataclass
class Outcome:
    """What a system returned for one query."""

    no_match: bool
    shown: list[Shown]  # empty when no_match
    ranking: list[Shown]  # the ranking behind the decision (suggestions when no_match)
    latency_s: float = 0.0
    confidence: float | None = None  # ours only: the right gate's probability that the top answer is right
    weak: bool = False  # ours only: answered as the closest entry, not as a match (no commands shown)
    answered: float | None = None  # ours only: the answered gate's probability, which "no match" reads


@dataclass
class Judged:
    row: GoldRow
    outcome: Outcome
    rank: int | None  # 1-based rank of the first correct entry among the shown ones
    ranking_rank: int | None  # the same, ignoring the no-match decision
    ndcg: float
    linked: bool | None  # own-language-first rows: the translation beside it is the expected one
    direction: str


def judge(row: GoldRow, outcome: Outcome, k: int, direction: str = "") -> Judged:
    strict = bool(row.translation)

    def first_rank(shown: list[Shown]) -> tuple[int | None, list[int]]:
        used: set[int] = set()
        gains: list[int] = []
        rank = None
        for pos, s in enumerate(shown, 1):
            cands = [s.entry] if strict else [s.entry, s.translation]
            matched = {
                j for j, x in enumerate(row.expected) for c in cands if c is not None and entry_matches(c, x)
            }
            new = matched - used
            used |= matched
            gains.append(1 if new else 0)
            if new and rank is None:
                rank = pos
        return rank, gains

    rank, gains = first_rank(outcome.shown)
    ranking_rank, _ = first_rank(outcome.ranking)
    ndcg = 0.0
    if row.expected:
        dcg = sum(g / math.log2(i + 1) for i, g in enumerate(gains[:k], 1))
        ideal = sum(1 / math.log2(i + 1) for i in range(1, min(_distinct_answers(row), k) + 1))
        ndcg = dcg / ideal
    linked = None
    if strict and rank is not None:
        t = outcome.shown[rank - 1].translation
        linked = t is not None and any(entry_matches(t, x) for x in row.translation)
    return Judged(row, outcome, rank, ranking_rank, ndcg, linked, direction or row.direction or "")


def _distinct_answers(row: GoldRow) -> int:
    """How many different answers the row expects in the index it is searched in: an item and
    its translation (`translation_of`) are one answer in two languages."""
    return max(1, sum(1 for x in row.expected if x.translation_of is None and x.kb in (None, row.kb)))


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def p95(xs: Sequence[float]) -> float:
    return percentile(xs, 0.95)


def metrics(judged: Sequence[Judged], k: int) -> dict:
    ans = [j for j in judged if j.row.answerable]
    una = [j for j in judged if not j.row.answerable]
    lat = [j.outcome.latency_s * 1000 for j in judged]
    linked = [j.linked for j in ans if j.linked is not None]
    strict = [j for j in ans if j.row.translation]
    return {
        "queries": len(judged),
        "answerable": len(ans),
        "unanswerable": len(una),
        "hit@1": _mean([j.rank == 1 for j in ans]),
        "hit@5": _mean([j.rank is not None and j.rank <= HIT5 for j in ans]),
        f"mrr@{k}": _mean([1 / j.rank if j.rank and j.rank <= k else 0.0 for j in ans]),
        f"ndcg@{k}": _mean([j.ndcg for j in ans]),
        "abstention": _mean([j.outcome.no_match for j in una]),
        "false_abstention": _mean([j.outcome.no_match for j in ans]),
        "ranking_hit@1": _mean([j.ranking_rank == 1 for j in ans]),
        # Answers shown as a confident match (with their commands), as opposed to "closest entry".
        "unanswerable_matched": _mean([_matched(j) for j in una]),
        "match_precision": _mean([j.row.answerable and j.rank == 1 for j in judged if _matched(j)]),
        "ranking_hit@5": _mean([j.ranking_rank is not None and j.ranking_rank <= HIT5 for j in ans]),
        "translation_linked": _mean([bool(x) for x in linked]) if strict else None,
        "latency_ms_median": round(statistics.median(lat), 1) if lat else None,
        "latency_ms_p95": round(p95(lat), 1) if lat else None,
        **gate_separation(ans, una),
    }


def gate_separation(ans: Sequence[Judged], una: Sequence[Judged]) -> dict:
    """How far the answered gate tells the answerable queries from the unanswerable ones,
    whatever its thresholds: `gate_auc`, the chance that an answerable query gets a higher
    P(answered) than an unanswerable one (ties count half); and `abstention_ceiling`, the share
    of unanswerable queries turned away by the best threshold that turns away at most
    TURNED_AWAY_ALLOWED of the answerable ones, picked after the fact on these very queries as the
    fit picks one (evaluation/fitting.py pick_threshold): what one threshold could do at best;
    the fitted ones are set on other queries. An unanswerable query searched in several indexes
    counts with its highest probability, as one index's match is shown. Why: a threshold trades the two shares against each other, so a change that moves
    both may only have moved along the same trade-off; these say whether it tells the two kinds
    apart better."""
    import numpy as np

    from .fitting import pick_threshold

    a = np.array([j.outcome.answered for j in ans if j.outcome.answered is not None])
    u = [j.outcome.answered for j in una if j.outcome.answered is not None]
    if not len(a) or not u:
        return {"gate_auc": None, "abstention_ceiling": None}
    above = sum(float(np.sum(a > y) + 0.5 * np.sum(a == y)) for y in u)
    cut = pick_threshold(a, np.array(u), TURNED_AWAY_ALLOWED)
    return {
        "gate_auc": round(above / (len(a) * len(u)), 4),
        "abstention_ceiling": _mean([y < cut for y in u]),
    }


def separation_line(m: dict) -> str | None:
    """gate_separation's numbers in words, for `kb eval`'s report (None: no gate to read)."""
    if m.get("gate_auc") is None:
        return None
    return (
        f"the gate tells answerable from unanswerable queries with AUC {m['gate_auc']:.3f}; the best "
        f"threshold turning away at most {TURNED_AWAY_ALLOWED:.2f} of the answerable would say no match "
        f"to {m['abstention_ceiling']:.3f} of the unanswerable"
    )


def _matched(j: Judged) -> bool:
    return not j.outcome.no_match and not j.outcome.weak


def grouped(judged: Sequence[Judged], k: int) -> dict:
    groups: dict[str, dict[str, list[Judged]]] = {"by_kind": {}, "by_direction": {}, "by_kb": {}}
    for j in judged:
        groups["by_kind"].setdefault(j.row.kind, []).append(j)
        groups["by_direction"].setdefault(j.direction, []).append(j)
        if j.row.kb or not j.row.answerable:
            groups["by_kb"].setdefault(j.row.kb or "none", []).append(j)
    out = {"overall": metrics(judged, k)}
    for name, by in groups.items():
        if by:
            out[name] = {g: metrics(js, k) for g, js in sorted(by.items())}
    return out


def misses(judged: Sequence[Judged]) -> list[dict]:
    """The queries not answered right. A cross-validation repeated over splits into folds judges
    every row once per split, in turn: each miss then names the split it came from."""
    out = []
    repeated = len(judged) > len({j.row.id for j in judged})
    runs: dict[str, int] = {}
    for j in judged:
        split = runs[j.row.id] = runs.get(j.row.id, -1) + 1
        if j.row.answerable and j.rank == 1 and j.linked is not False:
            continue
        if not j.row.answerable and j.outcome.no_match:
            continue
        if not j.row.answerable:
            why = "answered an unanswerable query"
        elif j.outcome.no_match:
            why = "no_match" + (f" (ranked {j.ranking_rank})" if j.ranking_rank else "")
        elif j.rank is None:
            why = "not in the top k"
        elif j.rank > 1:
            why = f"ranked {j.rank}"
        else:
            why = "translation not linked"
        got = j.outcome.shown or j.outcome.ranking
        out.append(
            {
                "id": j.row.id,
                "kind": j.row.kind,
                "direction": j.direction,
                "why": why,
                "query": j.row.query[-300:],
                "expected": [{k: v for k, v in asdict(x).items() if v is not None} for x in j.row.expected],
                "got": [f"{s.entry.doc}:{s.entry.start_line} {s.entry.title[:80]}" for s in got[:3]],
                "confidence": j.outcome.confidence,
                **({"split": split} if repeated else {}),
            }
        )
    return out
