"""How the cross-validated numbers grow with the labelled posts the model is fitted on.

    python eval/learning_curve.py                      # shares 0.125 0.25 0.5 1 of the training posts
    python eval/learning_curve.py --shares 0.5 1 --splits 1

The same cross-validation as eval/fit.py (5 folds, stratified, over --splits splits, every fold's
model fitted on the other folds' real posts plus our own sets and never scoring a post it saw),
except that each fold is fitted on a seeded share of the other folds' posts, taken from each
knowledge base and from the unanswerable posts in proportion. The held-out posts are the same at
every share, so the rows differ only in how many labelled posts the fit had. The model for an
index with precedents is measured too, its precedents being the same kept posts: what a team
that had answered and labelled that many posts would have.

Why it is measured: every ranking feature tried since stop 42 moved Hit@1 by less than the
spread between folds, and the model with precedents reaches 0.75. This says whether the numbers
are limited by the labelled posts, and by how much a doubling of them moves each number.

Writes learning_curve.md and learning_curve.json in eval/results (or --results).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # eval/fit.py, whose import puts the checkout on the path

from fit import collect_all, cross_validated  # noqa: E402

from evaluation.fit_report import mean_of  # noqa: E402
from evaluation.folds import FOLDS  # noqa: E402
from kb.config import load_settings  # noqa: E402
from kb.progress import ProgressBar  # noqa: E402

SHARES = (0.125, 0.25, 0.5, 1.0)  # doublings, as the trend line reads them
KEYS = ("hit@1", "hit@5", "mrr@10", "ranking_hit@1", "abstention", "false_abstention", "unanswerable_matched")
TARGET_HIT1 = 0.75  # issue 11's target


def point(cv: dict, share: float, posts: float) -> dict:
    """One row of the curve: the fold means, plain and with precedents."""
    return {
        "share": share,
        "posts": round(posts, 1),
        "plain": {k: mean_of(cv["folds"], ("overall",), k) for k in KEYS},
        "with_precedents": {k: mean_of(cv["with_precedents"], ("overall",), k) for k in KEYS},
        "fold_sd_hit@1": round(statistics.stdev(f["overall"]["hit@1"] for f in cv["folds"]), 4),
    }


def per_doubling(points: list[dict], model: str, key: str = "hit@1") -> dict | None:
    """A least-squares line of `key` against log2 of the posts fitted on: its gain per doubling
    of the posts, and where the line would cross issue 11's Hit@1 target (an extrapolation past
    the last point, said as such)."""
    xs = [math.log2(p["posts"]) for p in points if p[model][key] is not None]
    ys = [p[model][key] for p in points if p[model][key] is not None]
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    slope, intercept = statistics.linear_regression(xs, ys)
    out = {"per_doubling": round(slope, 4), "intercept": round(intercept, 4)}
    if key == "hit@1" and slope > 0:
        out["posts_at_target"] = round(2 ** ((TARGET_HIT1 - intercept) / slope))
    return out


def render(report: dict) -> str:
    shares = " ".join(f"{p['share']:g}" for p in report["points"])
    lines = [
        "# Learning curve: the cross-validated numbers against the labelled posts fitted on",
        "",
        f"Measured {report['measured_at']} with `python eval/learning_curve.py --shares "
        f"{shares} --splits {report['splits']}` (embedder "
        f"{report['embedder']}; {report['splits']} split(s) into {FOLDS} folds, {report['seconds']:.0f} s). "
        "Every row scores the same held-out posts; a fold's model is fitted on a seeded share of the "
        "other folds' real posts (by knowledge base and answerability), plus the project's own sets "
        'at every share. "posts" is the mean number of real posts a fold was fitted on.',
        "",
    ]
    for model, title in (("plain", "An index without precedents"), ("with_precedents", "An index given the same posts as precedents")):  # fmt: skip
        lines += [
            f"## {title}",
            "",
            '| share | posts | Hit@1 | Hit@5 | MRR@10 | ranking Hit@1 | "no match" on unanswerable '
            "| answerable turned away | unanswerable shown a match |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for p in report["points"]:
            cells = ["-" if p[model][k] is None else f"{p[model][k]:.3f}" for k in KEYS]
            lines.append(f"| {p['share']:g} | {p['posts']:.1f} | " + " | ".join(cells) + " |")
        trend = report["trend"].get(model)
        if trend:
            line = f"Hit@1 gains {trend['per_doubling']:+.3f} per doubling of the posts (least squares on log2 of them)"
            if "posts_at_target" in trend:
                beyond = trend["posts_at_target"] > max(p["posts"] for p in report["points"])
                line += (
                    f"; the line reaches Hit@1 {TARGET_HIT1} at about {trend['posts_at_target']} posts "
                    "fitted on "
                    + (
                        "(an extrapolation past the measured points, not a promise)"
                        if beyond
                        else "(within them)"
                    )
                )
            lines += ["", line + "."]
        lines.append("")
    sd = ", ".join(f"{p['share']:g}: {p['fold_sd_hit@1']:.3f}" for p in report["points"])
    lines += [f"Spread of Hit@1 between folds (sd, no precedents), by share: {sd}.", ""]
    return "\n".join(lines)


def _arguments(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--shares",
        type=float,
        nargs="+",
        default=list(SHARES),
        metavar="S",
        help="shares of the other folds' posts each fold is fitted on, in (0, 1]",
    )
    ap.add_argument("--splits", type=int, default=3, help="splits into folds to average over")
    ap.add_argument("--results", default=str(HERE / "results"), help="where the two files go")
    args = ap.parse_args(argv)
    bad = [s for s in args.shares if not 0.0 < s <= 1.0]
    if bad:
        ap.error(f"--shares are shares of the training posts, in (0, 1]: not {bad}")
    if args.splits < 1:
        ap.error("--splits is at least 1")
    return args


def main(argv=None) -> int:
    args = _arguments(argv)
    settings = load_settings()
    progress = ProgressBar()
    t0 = time.time()
    dev, targets, dev_examples, companions, own, _, embedder = collect_all(settings, progress)
    points = []
    for share in sorted(set(args.shares)):
        progress.note(f"share {share:g} of the training posts: {args.splits} split(s) x {FOLDS} folds")
        cv = cross_validated(
            dev, targets, dev_examples, own, progress, splits=args.splits, companions=companions,
            train_share=share,
        )  # fmt: skip
        points.append(point(cv, share, statistics.mean(cv["posts_fitted_on"])))
        print(json.dumps(points[-1]), flush=True)
    report = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
        "embedder": embedder.id,
        "splits": args.splits,
        "points": points,
        "trend": {m: t for m in ("plain", "with_precedents") if (t := per_doubling(points, m))},
        "seconds": round(time.time() - t0, 1),
    }
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "learning_curve.json").write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    (results / "learning_curve.md").write_text(render(report), "utf-8")
    print(f"wrote {results / 'learning_curve.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
