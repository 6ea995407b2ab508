"""fit.md: what eval/fit.py measured (cross-validated fold means, the one-document indexes,
in-sample numbers, a team's own posts) and the committed model's weights, for people to read."""

from __future__ import annotations

import statistics
from collections import Counter

from . import crossval


def mean_of(groups: list[dict], path: tuple[str, ...], key: str) -> float | None:
    vals = []
    for g in groups:
        node = g
        for p in path:
            node = node.get(p, {})
        if node.get(key) is not None:
            vals.append(node[key])
    return round(statistics.mean(vals), 4) if vals else None


def _fold_rows(cv: dict, groups) -> list[str]:
    folds = cv["folds"]
    lines = []
    pooled = cv["repeats"][0]
    for label, path in groups:
        node = pooled
        for p in path:
            node = node.get(p, {})
        if not node:
            continue
        cells = []
        keys = ("hit@1", "hit@5", "mrr@10", "abstention", "false_abstention", "ranking_hit@1")
        for key in (*keys, "unanswerable_matched", "match_precision"):
            v = mean_of(folds, path, key)
            cells.append("-" if v is None else f"{v:.3f}")
        lines.append(f"| {label} | {node['queries']} | " + " | ".join(cells) + " |")
    return lines


def _model_rows(model: dict) -> list[str]:
    th = ", ".join(f"{k} {v:.3f}" for k, v in model["thresholds"].items())
    lines = [
        "",
        "## The committed model",
        "",
        f'"No match" below the answered gate\'s probability that the index answers the post, by query '
        f"shape: {th}. Shown as a match (with its commands) from the right gate's probability "
        f"{model['confident']:.3f} that the top answer is right; below it, as the closest entry, without its "
        "commands. "
        f"A short query that shares no word with its top entry is shown it only from a cosine of "
        f"{model.get('unshared_dense', 0.0):.3f} (index/gate.py shares_no_word).",
        "",
    ]
    lines += ["| ranking feature | weight (standardised) |", "|---|---|"]
    lines += [
        f"| {f} | {w:+.3f} |"
        for f, w in zip(model["rank"]["features"], model["rank"]["weights"], strict=True)
    ]
    lines += _tree_rows(model["rank"].get("trees"))
    blank = {"weights": [None] * len(model["gate"]["weights"])}
    gates = [model.get(k) or blank for k in ("gate", "small", "answered", "answered_small")]
    lines += [
        "",
        "| gate feature | right gate (standardised) | in a small index | answered gate | in a small index |",
        "|---|---|---|---|---|",
    ]
    for f, *ws in zip(model["gate"]["features"], *(g["weights"] for g in gates), strict=True):
        lines.append(f"| {f} | " + " | ".join("-" if w is None else f"{w:+.3f}" for w in ws) + " |")
    return lines


def _tree_rows(trees: dict | None) -> list[str]:
    if not trees:
        return []
    names = trees["features"]
    splits = Counter(names[f] for t in trees["trees"] for f in t["feature"] if f >= 0)
    top = ", ".join(f"{f} ({n})" for f, n in splits.most_common(8))
    return [
        "",
        f"Plus {len(trees['trees'])} regression trees on the linear score's residual (index/trees.py), "
        f"over {len(names)} features; the features they split on most (splits): {top}.",
    ]


FOLD_HEADER = (
    '| rows | n | Hit@1 | Hit@5 | MRR@10 | "no match" on unanswerable | answerable turned away | '
    "ranking Hit@1 (before the gate) | unanswerable shown as a match | matches that are right |",
    "|---|---|---|---|---|---|---|---|---|---|",
)


# The held-out folds of the models for an index with precedents (and gaps), as cross_validated
# in eval/fit.py names them, and what each table is.
TAUGHT = (
    ("with_precedents", "The same folds, each held-out post with the posts of the other folds as its precedents "
     "(index/precedents.py: what an index given the posts it answered before has), ranked by the "
     "model for an index with precedents:"),
    ("with_gaps", "The same, the unanswerable posts of the other folds being its gaps too (posts nothing answers), "
     "ranked by the model for an index with gaps (index/ranker.py RankModel.with_gaps):"),
)  # fmt: skip


def _taught_rows(cv: dict, groups) -> list[str]:
    lines: list[str] = []
    for key, about in TAUGHT:
        if cv.get(key):
            lines += [
                "",
                about,
                "",
                *FOLD_HEADER,
                *_fold_rows({"folds": cv[key], "repeats": cv["repeats"]}, groups),
            ]
    return lines


def _nudge_line(nudge: dict | None) -> list[str]:
    if not nudge:
        return []
    return [
        "",
        f"Nudged (`--nudge {nudge['seed']}`): every feature but whole numbers was moved by about "
        f"{nudge['share']:g} of itself before fitting, to see how far the numbers move by chance. "
        "Not a model to ship.",
    ]


def _kept_line(fitted_at: str | None) -> list[str]:
    if fitted_at is None:
        return []
    return [
        "",
        f"The model for an index without precedents was kept from the fit of {fitted_at} (`--keep-plain`): "
        "the cross-validation below refits it on every fold as always, and the in-sample rows and the "
        "weights below are the kept model's; only the models for an index with precedents were fitted now.",
    ]


def render(report: dict) -> str:
    cv = report["cv"]
    data = ", ".join(f"{s['set']} ({s['rows']} {s.get('unit', 'rows')})" for s in report["sources"])
    lines = [
        "# Ranking model and no-match gate: cross-validated on real posts",
        "",
        f"Fitted {report['fitted_at']} with `python eval/fit.py` (embedder {report['embedder']}). "
        f"Data: {data}. "
        f"{crossval.FOLDS}-fold cross-validation over the real posts, stratified by knowledge base and "
        f"answerability, repeated {report['repeats']} times; every fold's model is fitted on the other folds (with their "
        "one-document searches) plus the project's own sets, and never scores a post it was fitted on. Answerable posts are searched in the "
        "index of their knowledge base; an unanswerable post in both, and it counts as turned away only when "
        'both say "no match".',
        *_nudge_line(report.get("nudge")),
        *_kept_line(report.get("plain_kept_from")),
        "",
        "## Fold means (cross-validated)",
        "",
        *FOLD_HEADER,
    ]
    groups = [("all", ("overall",)), ("seeds", ("by_kb", "seeds")), ("corpus", ("by_kb", "corpus")),
              ("unanswerable", ("by_kb", "none")), ("en", ("by_direction", "en")), ("mixed", ("by_direction", "mixed")),
              ("zh", ("by_direction", "zh")), ("exact", ("by_kind", "exact")), ("root_cause", ("by_kind", "root_cause")),
              ("partial", ("by_kind", "partial"))]  # fmt: skip
    lines += _fold_rows(cv, groups)
    lines += _taught_rows(cv, groups)
    lines += _one_document_rows(cv.get("one_document") or [])
    ins = report["in_sample"]
    lines += [
        "",
        "## In-sample (the committed model on the posts it was fitted on)",
        "",
        '| rows | Hit@1 | Hit@5 | "no match" on unanswerable | answerable turned away |',
        "|---|---|---|---|---|",
    ]
    for label, path in groups[:4]:
        node = ins
        for p in path:
            node = node.get(p, {})
        if node:
            lines.append(
                f"| {label} | {node.get('hit@1') or 0:.3f} | {node.get('hit@5') or 0:.3f} | "
                f"{node.get('abstention') or 0:.3f} | {node.get('false_abstention') or 0:.3f} |"
            )
    lines += _team_rows(report)
    lines += _model_rows(report["model"])
    return "\n".join(lines) + "\n"


def _one_document_rows(repeats: list[dict]) -> list[str]:
    if not repeats:
        return []

    def mean(key: str) -> str:
        return f"{statistics.mean(r[key] for r in repeats):.3f}"

    first = repeats[0]
    return [
        "",
        f"Each real post also searched in an index of one document alone ({first['documents']} documents; "
        "evaluation/subsets.py), held out the same way: of the "
        f"{first['answered']} searches whose document answers the post, {mean('answered_right')} were shown "
        f"the right entry as a match and {mean('answered_wrong')} a wrong one; of the other {first['others']}, "
        f"{mean('others_matched')} were shown a match.",
    ]


def _team_rows(report: dict) -> list[str]:
    if not report.get("team"):
        return []
    lines = [
        "",
        "## The team's own posts (--gold)",
        "",
        "Cross-validated with the shared posts (fold means), and in-sample (the committed model).",
        "",
        '| set | n | Hit@1 | Hit@5 | MRR@10 | "no match" on unanswerable | answerable turned away | '
        "Hit@1 in-sample |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in report["team"].items():
        cells = [
            mean_of(t["folds"], (), key)
            for key in ("hit@1", "hit@5", "mrr@10", "abstention", "false_abstention")
        ]
        cells.append(t["in_sample"].get("hit@1"))
        text = " | ".join("-" if v is None else f"{v:.3f}" for v in cells)
        lines.append(f"| {name} | {t['in_sample']['queries']} | {text} |")
    return lines
