"""`kb eval`: run the systems on gold sets, cross-validate ours on real posts, report."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from kb.config import Settings, load_settings
from kb.errors import KbError

from . import crossval, llm_stage, subsets
from .folds import REPEATS
from .gold import GoldRow, GoldSet, entry_matches, load_gold
from .indexes import Indexes, Target
from .metrics import Judged, Outcome, grouped, judge, metrics, misses, separation_line
from .systems import SYSTEM_LABELS, SYSTEMS, make_system

GOLD_DIR = Path(__file__).resolve().parents[1] / "eval" / "gold"
# The committed gold sets under eval/gold/, in the order the reports list them.
GOLD_FILES = (
    "seeds.jsonl",
    "crosslingual_zh2en.jsonl",
    "crosslingual_en2zh.jsonl",
    "crosslingual_both.jsonl",
)
CV_SYSTEM = "ours (cross-validated)"
LABELS = {
    **SYSTEM_LABELS,
    CV_SYSTEM: "ours, cross-validated (each fold scored by a model fitted without it)",
    llm_stage.SYSTEM: "ours, then the language model reads each answer (cites one or turns it away)",
}


def _direction(row: GoldRow, loaded, real_posts: bool) -> str:
    if row.direction:
        return row.direction
    if real_posts:
        return row.lang  # the language of the post: en, mixed or zh
    if not row.expected:
        return f"{row.lang}->none"
    x = row.expected[0]
    langs = {e.lang for e in loaded.entries if entry_matches(e, x)}
    target = langs.pop() if len(langs) == 1 else "?"
    return f"{row.lang}->{target}"


def unresolved(gold: GoldSet, targets: dict[str | None, Target]) -> list[str]:
    """Expected items that name no entry of their index: mistakes in the gold set (or a parser
    change that moved an entry), reported instead of silently counted as misses."""
    out = []
    for row in gold.rows:
        for x in [*row.expected, *row.translation]:
            t = targets.get(x.kb) or targets.get(None)
            if t is None:
                continue
            if not any(entry_matches(e, x) for e in t.loaded.entries):
                where = x.line if x.line is not None else (f"{x.start}-{x.end}" if x.start else repr(x.title))
                out.append(f"{row.id}: {x.doc} {where}")
    return out


def _kbs_of(row: GoldRow, targets: dict) -> list:
    """The indexes a row is searched in: its own, or every one when it is unanswerable."""
    return [row.kb] if row.kb in targets else list(targets)


def _merge(outs: list[Outcome]) -> Outcome:
    """An unanswerable post searched in several indexes is turned away only when every one of
    them says no match; what the first answering index showed is what the user would see."""
    answering = [o for o in outs if not o.no_match]
    first = answering[0] if answering else outs[0]
    return Outcome(
        no_match=not answering,
        shown=first.shown,
        ranking=first.ranking,
        latency_s=max(o.latency_s for o in outs),
        confidence=max((o.confidence for o in outs if o.confidence is not None), default=None),
        weak=first.weak if answering else False,
        answered=max((o.answered for o in outs if o.answered is not None), default=None),
    )


def _judge_all(gold: GoldSet, by_row: dict[str, list[Outcome]], targets, k: int) -> list[Judged]:
    first = next(iter(targets.values()))
    judged = []
    for row in gold.rows:
        loaded = (targets.get(row.kb) or first).loaded
        judged.append(judge(row, _merge(by_row[row.id]), k, _direction(row, loaded, gold.per_row_kb)))
    return judged


def warm_up(system) -> None:
    """Load lazily initialised parts (the segmenter's dictionary, the model) outside the timings."""
    for q in ("NCCL WARN Connect failed", "分布式训练报错怎么办"):
        system.run(q, 1)


@dataclass
class SetResult:
    gold: GoldSet
    target_label: str
    judged: dict[str, list[Judged]] = field(default_factory=dict)  # system -> per-query results
    unresolved: list[str] = field(default_factory=list)
    fold_means: dict | None = None  # cross-validation: metrics averaged over folds
    folds: int = 0
    splits: int = 0  # how many splits into folds the cross-validation was repeated over
    one_document: dict | None = None  # cross-validation in one-document indexes (evaluation/subsets.py)
    llm: dict | None = None  # `--llm`: what the language model did (evaluation/llm_stage.py)

    def report(self, k: int, with_misses: bool = True) -> dict:
        out = {
            "set": self.gold.name,
            "path": str(self.gold.path),
            "index": self.target_label,
            "unresolved_expected": self.unresolved,
            "systems": {
                name: {
                    **grouped(js, k),
                    **({"misses": misses(js)} if with_misses and name in ("ours", CV_SYSTEM) else {}),
                }
                for name, js in self.judged.items()
            },
        }
        if self.fold_means is not None:
            out["cross_validation"] = {
                "folds": self.folds,
                "splits": self.splits,
                "fold_means": self.fold_means,
            }
            if self.one_document:
                out["cross_validation"]["one_document_indexes"] = self.one_document
        if self.llm is not None:
            out["language_model"] = self.llm
        return out


class _Training:
    """The project's own gold sets, searched once, as extra training rows for every fold."""

    def __init__(self, indexes: Indexes, embedder, progress=None) -> None:
        self.indexes, self.embedder, self.progress = indexes, embedder, progress
        self._examples: list[crossval.Example] | None = None

    def examples(self) -> list[crossval.Example]:
        from index.search import Searcher

        if self._examples is None:
            self._examples = []
            for name in GOLD_FILES:
                path = GOLD_DIR / name
                if path.exists():
                    gold = load_gold(path, self.indexes.settings.shared)
                    target = self.indexes.for_set(gold)
                    searcher = Searcher(target.loaded, self.embedder)
                    self._examples += crossval.collect(gold, {None: searcher}, self.progress)
        return self._examples


def _fold_means(per_fold: list[dict]) -> dict:
    """The mean and spread over folds (of every split) of each metric."""
    keys = [key for key, v in per_fold[0].items() if isinstance(v, float)]
    out = {}
    for key in keys:
        vals = [m[key] for m in per_fold if m.get(key) is not None]
        if vals:
            out[key] = round(statistics.mean(vals), 4)
            out[f"{key}_sd"] = round(statistics.pstdev(vals), 4)
    return out


def _run_ours(res: SetResult, gold: GoldSet, targets, embedder, model, training, k, cross_validate, progress,
              read_by_model: Callable | None = None, splits: int = REPEATS):  # fmt: skip
    """`read_by_model`: `--llm`'s reader of the committed model's answers; `splits`: of the CV."""
    from index.search import Searcher

    searchers = {name: Searcher(t.loaded, embedder, model) for name, t in targets.items()}
    warm_up(_SearcherSystem(next(iter(searchers.values()))))
    examples = crossval.collect(gold, searchers, progress)
    decisions = [crossval.decided(ex, ex.searcher.model, k) for ex in examples]
    res.judged["ours"] = _judge_all(
        gold, crossval.by_row(examples, {i: d[1] for i, d in enumerate(decisions)}), targets, k
    )
    if read_by_model is not None:
        read, res.llm = read_by_model(examples, decisions, progress=progress)
        res.judged[llm_stage.SYSTEM] = _judge_all(gold, read, targets, k)
    if not (cross_validate and gold.per_row_kb):
        return
    # The fit's one-document searches (eval/fit.py does the same), when the set names its
    # knowledge bases rather than an --index.
    settings = training.indexes.settings
    companions = [] if training.indexes.index_arg else subsets.companions(gold, settings, embedder, progress)
    judged, per_fold, held = [], [], []
    for seed in range(splits):
        outcomes, folds, held_split = crossval.cross_validate(
            examples, training.examples(), k, seed=seed, progress=progress, companions=companions
        )
        held += held_split
        split = _judge_all(gold, crossval.by_row(examples, outcomes), targets, k)
        judged += split  # every row once per split: the pooled numbers are the splits' mean
        fold_of = {ex.row.id: f for ex, f in zip(examples, folds, strict=True)}
        per_fold += [metrics([j for j in split if fold_of[j.row.id] == f], k) for f in sorted(set(folds))]
    if companions:
        res.one_document = subsets.held_out(companions, held, splits)
    res.judged[CV_SYSTEM] = judged
    res.fold_means = _fold_means(per_fold)
    res.folds, res.splits = crossval.FOLDS, splits


class _SearcherSystem:
    name = "ours"

    def __init__(self, searcher) -> None:
        self.searcher = searcher

    def run(self, query: str, k: int):
        return self.searcher.search(query, k=k)


def _run_baseline(res: SetResult, name: str, gold: GoldSet, targets, embedder, k, progress, settings) -> None:
    import time

    by_row: dict[str, list[Outcome]] = {}
    for kb, target in targets.items():
        system = make_system(name, target, embedder, progress=progress, settings=settings)
        warm_up(system)
        rows = [r for r in gold.rows if kb in _kbs_of(r, targets)]
        for n, row in enumerate(rows, 1):
            t0 = time.perf_counter()
            out = system.run(row.query, max(k, 5))
            out.latency_s = time.perf_counter() - t0
            by_row.setdefault(row.id, []).append(out)
            if progress:
                progress(name, n, len(rows), row.id)
    res.judged[name] = _judge_all(gold, by_row, targets, k)


def evaluate(
    gold_paths: Sequence[str | Path],
    index: str | None = None,
    k: int = 10,
    systems: Sequence[str] = ("ours",),
    settings: Settings | None = None,
    model=None,
    progress: Callable | None = None,
    indexes: Indexes | None = None,
    cross_validate: bool = True,
    llm: bool = False,
    chat_model=None,
    splits: int = REPEATS,
) -> list[SetResult]:
    """Run every system on every gold set; the indexes are built once and shared. On real-post
    sets (one knowledge base per row) ours is also cross-validated. `llm`: also let the language
    model read ours' answers (`chat_model`, or the one the settings name)."""
    from kb.indexing import embedder_for

    settings = settings or load_settings()
    if model is None and settings.ranker:  # the model `kb ask` answers with, not the shipped one
        from index.ranker import load_model

        model = load_model(settings.ranker)
    indexes = indexes or Indexes(settings, index, progress)
    embedder = embedder_for(settings)
    training = _Training(indexes, embedder, progress)
    reader = partial(llm_stage.read_by_model, settings=settings, model=chat_model) if llm else None
    results = []
    for path in gold_paths:
        gold = load_gold(path, settings.shared)
        if gold.per_row_kb and not index:
            targets: dict[str | None, Target] = dict(indexes.for_kbs(gold))
        else:
            targets = {None: indexes.for_set(gold)}
        label = "; ".join(f"{kb}: {t.label}" if kb else t.label for kb, t in targets.items())
        res = SetResult(gold, label, unresolved=unresolved(gold, targets))
        for name in systems:
            if name == "ours":
                _run_ours(
                    res, gold, targets, embedder, model, training, k, cross_validate, progress, reader, splits
                )
            else:
                _run_baseline(res, name, gold, targets, embedder, k, progress, settings)
        results.append(res)
    return results


# ---- output ---------------------------------------------------------------------------------

_COLUMNS = (
    "hit@1", "hit@5", "mrr@{k}", "ndcg@{k}", "abstention", "false_abstention", "translation_linked",
    "latency_ms_median", "latency_ms_p95",
)  # fmt: skip


def _fmt(name: str, v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if name.startswith("latency") else f"{v:.3f}"


def markdown_table(rows: list[tuple[str, dict]], k: int, first: str = "") -> str:
    cols = [c.format(k=k) for c in _COLUMNS]
    if all(m.get("translation_linked") is None for _, m in rows):
        cols.remove("translation_linked")
    head = [first, "n", *cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, m in rows:
        lines.append("| " + " | ".join([label, str(m["queries"]), *(_fmt(c, m.get(c)) for c in cols)]) + " |")
    return "\n".join(lines)


def group_rows(g: dict) -> list[tuple[str, dict]]:
    rows = [("all", g["overall"])]
    rows += [(f"kb {n}", m) for n, m in g.get("by_kb", {}).items()]
    rows += [(f"kind {n}", m) for n, m in g["by_kind"].items()]
    if len(g["by_direction"]) > 1:
        rows += [(n, m) for n, m in g["by_direction"].items()]
    return rows


def text_report(results: list[SetResult], k: int) -> str:
    out = []
    for res in results:
        out.append(f"## {res.gold.name} ({len(res.gold.rows)} queries; index {res.target_label})")
        if res.unresolved:
            out.append(
                f"warning: {len(res.unresolved)} expected items name no entry: {'; '.join(res.unresolved[:5])}"
            )
        if len(res.judged) > 1:
            rows = [(LABELS.get(name, name), grouped(js, k)["overall"]) for name, js in res.judged.items()]
            out += [markdown_table(rows, k, "system"), ""]
        if res.fold_means:
            fm = res.fold_means
            out.append(
                f"cross-validated, mean of {res.folds} folds x {res.splits} splits: Hit@1 {fm['hit@1']:.3f} (sd {fm['hit@1_sd']:.3f}), "
                f"Hit@5 {fm['hit@5']:.3f}, abstention {fm.get('abstention', 0):.3f}, "
                f"false abstention {fm['false_abstention']:.3f}"
            )
            if line := separation_line(fm):
                out.append(line)
            if res.one_document:
                d = res.one_document
                out.append(
                    f"in {d['documents']} one-document indexes: of the searches a document answers, "
                    f"{d['answered_right']:.3f} shown the right entry as a match, {d['answered_wrong']:.3f} a wrong "
                    f"one; of the others, {d['others_matched']:.3f} shown a match"
                )
            out.append("")
        if res.llm is not None:
            m = res.llm
            out += [
                f"language model {m['model']}: read {m['asked']} answers; no source applies: "
                f"{m['no_source_applies']}; cited a source: {m['cited']} (not retrieval's first: "
                f"{m['changed_first']}); cited nothing or failed, retrieval's answer kept: {m['fell_back']}; "
                f"median {m['seconds_median']} s per answer",
                "",
            ]
        main = CV_SYSTEM if CV_SYSTEM in res.judged else "ours"
        ours = res.judged.get(main) or next(iter(res.judged.values()))
        out += [markdown_table(group_rows(grouped(ours, k)), k, main), ""]
        miss = [m for m in misses(ours) if not m.get("split")]  # of the first split, when repeated
        if miss:
            out.append(f"misses ({len(miss)}):")
            for m in miss[:15]:
                got = m["got"][0] if m["got"] else "-"
                out.append(f"  {m['id']}: {m['why']}; got {got}")
            if len(miss) > 15:
                out.append(f"  ... {len(miss) - 15} more (--json lists them all)")
        out.append("")
    return "\n".join(out)


def eval_command(args, settings: Settings) -> int:
    """`kb eval`: --k (args.cutoff) is the cut-off for MRR and nDCG, 10 unless given."""
    from kb.progress import ProgressBar

    k = args.cutoff or 10
    if args.splits is not None and args.splits < 1:
        raise KbError(f"--splits {args.splits}: give 1 or more splits of the cross-validation")
    systems = SYSTEMS if args.compare else ("ours",)
    results = evaluate(
        args.gold,
        index=args.index,
        k=k,
        settings=settings,
        systems=systems,
        progress=ProgressBar(quiet=args.json),
        cross_validate=not getattr(args, "no_cv", False),
        llm=getattr(args, "llm", False),
        splits=args.splits or REPEATS,
    )
    if args.json:
        print(json.dumps({"k": k, "sets": [r.report(k) for r in results]}, ensure_ascii=False))
    else:
        sys.stdout.write(text_report(results, k))
    return 0
