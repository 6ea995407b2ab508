"""Choose the no-match thresholds (index.search.Gate) on the gold sets, and report them.

Every search records what the gate looked at (index.search.GateSignals), and the ranking does
not depend on the gate, so the gold sets are searched once and every candidate Gate is
replayed on the recorded signals. The rule: keep false abstention (answerable queries turned
away) at or under --max-false on *every* set, and among those Gates turn away the most
unanswerable queries; ties go to the Gate that turns away fewer answerable ones, then to the
Gate nearest the middle of the tied region.

Honesty check: the same choice made on one half of the queries is scored on the other half
(2-fold, split by a hash of the query id), so the report shows what to expect on queries the
thresholds were not chosen on.

    python eval/calibrate.py                      # default gold sets, default embedder
    python eval/calibrate.py --embedder BAAI/bge-m3 eval/gold/seeds.jsonl ...

Paste the printed Gate(...) into index/search.py (the defaults) and re-run the tests; the
report is also written to eval/results/calibration.md.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from index.search import Gate  # noqa: E402
from kb.config import load_settings  # noqa: E402
from kb.evaluate import GOLD_FILES, evaluate  # noqa: E402

DEFAULT_SETS = [HERE / "gold" / f for f in GOLD_FILES]
GRID = {
    "signature_overlap": np.round(np.arange(0.40, 1.01, 0.05), 3),
    "dense_alone": np.round(np.arange(0.45, 0.801, 0.025), 3),
    "query_coverage": np.round(np.arange(0.10, 0.601, 0.05), 3),
    # Shared words alone never make an answer: below ~0.2 the cosine of two unrelated texts is
    # noise for these embedders, so the search starts there.
    "dense_with_coverage": np.round(np.arange(0.2, 0.501, 0.05), 3),
}


class Signals:
    """The recorded gate inputs of one or more gold sets, as arrays."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.set = np.array([r["set"] for r in rows])
        self.answerable = np.array([r["answerable"] for r in rows])
        self.correct = np.array([r["correct"] for r in rows])
        self.fold = np.array([int(hashlib.sha1(r["id"].encode()).hexdigest(), 16) % 2 for r in rows])
        for name in ("signature_overlap", "dense", "query_coverage"):
            setattr(self, name, np.array([r["signals"][name] for r in rows], dtype=np.float64))

    def accepts(self, g: Gate, mask=None) -> np.ndarray:
        ok = (
            (self.signature_overlap >= g.signature_overlap)
            | (self.dense >= g.dense_alone)
            | ((self.query_coverage >= g.query_coverage) & (self.dense >= g.dense_with_coverage))
        )
        return ok if mask is None else ok[mask]


def collect(gold: list[Path], embedder: str | None) -> Signals:
    settings = load_settings(**({"embedder": embedder} if embedder else {}))
    rows = []
    for res in evaluate(gold, settings=settings):
        for j in res.judged["ours"]:
            rows.append(
                {
                    "set": res.gold.name,
                    "id": j.row.id,
                    "answerable": j.row.answerable,
                    "correct": j.ranking_rank == 1,
                    "signals": j.outcome.signals,
                }
            )
    return Signals(rows)


def score(sig: Signals, g: Gate, mask: np.ndarray) -> dict[str, dict]:
    """Per set: false abstention, abstention, Hit@1 (a no_match counts as a miss)."""
    acc = sig.accepts(g)
    out = {}
    for name in dict.fromkeys(sig.set[mask]):
        m = mask & (sig.set == name)
        ans, una = m & sig.answerable, m & ~sig.answerable
        out[name] = {
            "answerable": int(ans.sum()),
            "unanswerable": int(una.sum()),
            "false_abstention": float((~acc[ans]).mean()) if ans.any() else None,
            "abstention": float((~acc[una]).mean()) if una.any() else None,
            "hit@1": float((acc[ans] & sig.correct[ans]).mean()) if ans.any() else None,
        }
    return out


def choose(sig: Signals, mask: np.ndarray, max_false: float) -> tuple[Gate, dict]:
    names = [f.name for f in fields(Gate)]
    best_key, tied = None, []
    for values in itertools.product(*(GRID[n] for n in names)):
        g = Gate(**dict(zip(names, map(float, values), strict=True)))
        s = score(sig, g, mask)
        if any(v["false_abstention"] is not None and v["false_abstention"] > max_false for v in s.values()):
            continue
        una = [v for v in s.values() if v["abstention"] is not None]
        abst = sum(v["abstention"] * v["unanswerable"] for v in una) / max(
            1, sum(v["unanswerable"] for v in una)
        )
        false = sum(v["false_abstention"] * v["answerable"] for v in s.values()) / max(
            1, sum(v["answerable"] for v in s.values())
        )
        key = (round(abst, 6), -round(false, 6))
        if best_key is None or key > best_key:
            best_key, tied = key, []
        if key == best_key:
            tied.append((np.array(values, dtype=np.float64), g, s))
    if not tied:
        raise SystemExit(f"no Gate in the grid keeps false abstention <= {max_false} on every set")
    # Many Gates tie on the gold sets; take the one nearest the middle of the tied region (in
    # grid steps), the choice least likely to flip on queries the sets do not have.
    steps = np.array([GRID[n][1] - GRID[n][0] for n in names])
    middle = np.median(np.stack([v for v, _, _ in tied]), axis=0)
    _, g, s = min(tied, key=lambda t: float((((t[0] - middle) / steps) ** 2).sum()))
    return g, s


def precision_recall(sig: Signals, g: Gate, mask: np.ndarray) -> tuple[float | None, float | None]:
    """Of the queries turned away, the share that nothing answers (precision); of the queries
    nothing answers, the share turned away (recall), over the sets that have such queries."""
    has_una = np.isin(sig.set, [s for s in dict.fromkeys(sig.set) if (~sig.answerable[sig.set == s]).any()])
    m = mask & has_una
    abstained = ~sig.accepts(g) & m
    una = ~sig.answerable & m
    precision = float((abstained & una).sum() / abstained.sum()) if abstained.any() else None
    recall = float((abstained & una).sum() / una.sum()) if una.any() else None
    return precision, recall


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(sig: Signals, max_false: float, embedder: str) -> str:
    everything = np.ones(len(sig.rows), dtype=bool)
    gate, per_set = choose(sig, everything, max_false)
    p, r = precision_recall(sig, gate, everything)
    lines = [
        "# No-match calibration",
        "",
        f"Embedder: `{embedder}`; rule: false abstention <= {max_false} on every set, then the most abstention.",
        "",
        f"Chosen: `Gate({', '.join(f'{k}={v:g}' for k, v in asdict(gate).items())})`",
        "",
        f"Abstention precision {_fmt(p)}, recall {_fmt(r)} (sets with unanswerable queries).",
        "",
        "| set | answerable | unanswerable | false abstention | abstention | Hit@1 |",
        "|---|---|---|---|---|---|",
    ]
    for name, v in per_set.items():
        lines.append(
            f"| {name} | {v['answerable']} | {v['unanswerable']} | {_fmt(v['false_abstention'])} | "
            f"{_fmt(v['abstention'])} | {_fmt(v['hit@1'])} |"
        )
    lines += ["", "Held out (chosen on one half of the queries, scored on the other):", ""]
    lines += ["| fold | set | false abstention | abstention | Hit@1 |", "|---|---|---|---|---|"]
    for fold in (0, 1):
        g, _ = choose(sig, sig.fold != fold, max_false)
        for name, v in score(sig, g, sig.fold == fold).items():
            lines.append(
                f"| {fold} | {name} | {_fmt(v['false_abstention'])} | {_fmt(v['abstention'])} | {_fmt(v['hit@1'])} |"
            )
    lines += ["", f"Current defaults in index/search.py: `{Gate()}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="choose the no-match thresholds on the gold sets")
    ap.add_argument("gold", nargs="*", type=Path, default=DEFAULT_SETS)
    ap.add_argument("--embedder", help="embedder to calibrate for (default: the configured one)")
    ap.add_argument("--max-false", type=float, default=0.05, help="largest false abstention allowed per set")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "calibration.md")
    args = ap.parse_args(argv)
    sig = collect(args.gold, args.embedder)
    text = report(sig, args.max_false, args.embedder or load_settings().embedder)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
