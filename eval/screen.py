"""Screen a change to the ranking's fit against main, paired: the same searches, the same splits.

    python eval/screen.py --tree-param path_smooth=1 --tree-param extra_trees=true
    python eval/screen.py --set-weight seeds=0.25
    python eval/screen.py --trees-leave-out dense_rank,lexical_rank
    python eval/screen.py --columns try.py [--linear-only]

Every real post (and our own sets, and the one-document searches) is searched once, as eval/fit.py
searches them; then main and each change are cross-validated on those searches over the same
--splits splits into 5 folds, in one process, and the fold means are printed side by side. A
change is one of:
- `--tree-param NAME=VALUE`: a LightGBM setting of the ranking trees (evaluation/fitting.py
  TREE_PARAMS), each flag a change of its own;
- `--trees-leave-out A,B`: features the trees do not read (the linear weights still do), each
  flag a change of its own;
- `--set-weight SET=W`: the weight of one query of a set in the fit (evaluation/crossval.py
  SET_WEIGHTS);
- `--columns FILE`: new candidate columns, from a Python file that defines `COLUMNS` (their
  names) and `columns(example)`, an array of one row per candidate of an evaluation/crossval.py
  Example; `--linear-only` keeps them out of the trees.

Why it exists: the tries recorded in index/features.py, index/trees.py and evaluation/gate_fit.py
moved Hit@1 by about as much as the splits differ (0.629, 0.656 and 0.666 for main), so a try is
only read against main on the same searches and splits. Until stop 69 each try wrote its own
screen on a branch, and the branches were lost with their machines. A refit's gate is judged
with eval/fit.py, whose one-document searches are in the screen too.

Measured with it at stop 70 (3 splits; main Hit@1 0.651, Hit@5 0.827, "no match" on unanswerable
posts 0.045, answerable posts turned away 0.028), none kept: the trees' path_smooth 1: 0.657,
0.830, 0.024, 0.037 (by split -0.009, +0.018, +0.009); path_smooth 5: 0.638, 0.821, 0.024, 0.022;
extra_trees: 0.628, 0.833, 0.042, 0.037; reg_lambda 5: 0.619, 0.836, 0.021, 0.025; objective
rank_xendcg: 0.222 (it does not start from the linear scores as lambdarank does). Stop 71's six
more tree settings and what the trees read: index/trees.py; columns of the candidate's document
and of the words it lacks: index/features.py; our own sets' weights: evaluation/crossval.py.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # eval/fit.py, whose import puts the checkout on the path

from fit import collect_all  # noqa: E402

from evaluation import crossval, fitting  # noqa: E402
from evaluation.fit_report import mean_of  # noqa: E402
from evaluation.metrics import grouped  # noqa: E402
from evaluation.run import _judge_all  # noqa: E402
from index.features import FEATURES  # noqa: E402
from kb.config import load_settings  # noqa: E402
from kb.errors import KbError  # noqa: E402
from kb.progress import ProgressBar  # noqa: E402

K = 10
KEYS = ("hit@1", "hit@5", "ranking_hit@1", "abstention", "false_abstention", "unanswerable_matched")
HEADINGS = ("Hit@1", "Hit@5", "ranking Hit@1", '"no match" on unanswerable', "answerable turned away",
            "unanswerable shown a match")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Change:
    """One try: a label, what it does to the fit while it is screened, and the columns it adds."""

    label: str
    patch: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    columns: tuple[str, ...] = ()
    compute: Callable | None = None  # Example -> (candidates, len(columns)) array


def setting(text: str) -> tuple[str, object]:
    """`NAME=VALUE` with VALUE read as a number, true/false, or else as it is written."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise KbError(f"{text!r}: write NAME=VALUE, for example path_smooth=1")
    low = raw.strip().lower()
    if low in ("true", "false"):
        return name.strip(), low == "true"
    try:
        value: object = float(raw)
        return name.strip(), int(value) if float(value).is_integer() and "." not in raw else value
    except ValueError:
        return name.strip(), raw.strip()


@contextlib.contextmanager
def patched(table: dict, updates: dict) -> Iterator[None]:
    """`table` with `updates` while the block runs, as it was afterwards (even after an error)."""
    saved = dict(table)
    table.update(updates)
    try:
        yield
    finally:
        table.clear()
        table.update(saved)


@contextlib.contextmanager
def kept_out_of_trees(names: tuple[str, ...]) -> Iterator[None]:
    saved = fitting.TREES_LEAVE_OUT
    fitting.TREES_LEAVE_OUT = (*saved, *names)
    try:
        yield
    finally:
        fitting.TREES_LEAVE_OUT = saved


def with_columns(examples, names: tuple[str, ...], compute: Callable) -> list:
    """The examples with `names` appended to their candidates' columns, computed by `compute`."""
    out = []
    for ex in examples:
        c = ex.candidates
        if len(c.entries):
            extra = np.asarray(compute(ex), dtype=c.x.dtype).reshape(len(c.entries), len(names))
            x = np.hstack([c.x, extra])
        else:
            x = np.zeros((0, c.x.shape[1] + len(names)), dtype=c.x.dtype)
        out.append(dataclasses.replace(ex, candidates=dataclasses.replace(c, x=x, names=(*c.names, *names))))
    return out


def load_columns(path: str, linear_only: bool) -> Change:
    spec = importlib.util.spec_from_file_location("screened_columns", path)
    if spec is None or spec.loader is None:
        raise KbError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = tuple(getattr(module, "COLUMNS", ()))
    if not names or not callable(getattr(module, "columns", None)):
        raise KbError(f"{path}: define COLUMNS (the new columns' names) and columns(example)")
    patch = (lambda: kept_out_of_trees(names)) if linear_only else contextlib.nullcontext
    label = f"{Path(path).stem} columns" + (" (linear only)" if linear_only else "")
    return Change(label, patch, names, module.columns)


def fold_means(dev, targets, dev_ex, companions, own, splits: int, cross_validate=None) -> dict:
    """The fold means of KEYS over `splits` splits, and each split's mean Hit@1."""
    cross_validate = cross_validate or crossval.cross_validate
    folds, by_split = [], []
    for seed in range(splits):
        outcomes, fold_ids, _ = cross_validate(dev_ex, own, K, seed=seed, companions=companions)
        judged = _judge_all(dev, crossval.by_row(dev_ex, outcomes), targets, K)
        fold_of = {ex.row.id: f for ex, f in zip(dev_ex, fold_ids, strict=True)}
        split = [grouped([j for j in judged if fold_of[j.row.id] == f], K) for f in sorted(set(fold_ids))]
        folds += split
        by_split.append(mean_of(split, ("overall",), "hit@1"))
    return {**{k: mean_of(folds, ("overall",), k) for k in KEYS}, "split_hit@1": by_split}


def screen(changes: list[Change], searched, splits: int, cross_validate=None, report=print) -> list[dict]:
    """Main, then each change, on the same searches and splits."""
    dev, targets, dev_ex, companions, own = searched
    rows = []
    for change in [Change("main"), *changes]:
        t0 = time.time()
        groups = (dev_ex, companions, own)
        if change.compute is not None:
            groups = tuple(with_columns(g, change.columns, change.compute) for g in groups)
        with change.patch():
            row = {"change": change.label, **fold_means(dev, targets, *groups, splits, cross_validate)}
        row["seconds"] = round(time.time() - t0, 1)
        report(json.dumps(row))
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| change | " + " | ".join(HEADINGS) + " | Hit@1 by split |", "|---" * (len(KEYS) + 2) + "|"]
    for r in rows:
        cells = ["-" if r[k] is None else f"{r[k]:.3f}" for k in KEYS]
        split = ", ".join("-" if v is None else f"{v:.3f}" for v in r["split_hit@1"])
        lines.append(f"| {r['change']} | " + " | ".join(cells) + f" | {split} |")
    return "\n".join(lines)


def changes_from(args) -> list[Change]:
    out = []
    for text in args.tree_param:
        name, value = setting(text)
        out.append(Change(f"trees {name}={value}", lambda u={name: value}: patched(fitting.TREE_PARAMS, u)))
    for text in args.trees_leave_out:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        unknown = [n for n in names if n not in FEATURES]
        if not names or unknown:
            raise KbError(f"--trees-leave-out {text!r}: not features of the ranking: {unknown or text}")
        out.append(Change(f"trees without {','.join(names)}", lambda n=names: kept_out_of_trees(n)))
    for text in args.set_weight:
        name, value = setting(text)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise KbError(f"--set-weight {text!r}: the weight is a number")
        out.append(
            Change(f"weight {name}={value}", lambda u={name: float(value)}: patched(crossval.SET_WEIGHTS, u))
        )
    if args.columns:
        out.append(load_columns(args.columns, args.linear_only))
    if not out:
        raise KbError("nothing to screen: give --tree-param, --trees-leave-out, --set-weight or --columns")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree-param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--trees-leave-out", action="append", default=[], metavar="A,B")
    ap.add_argument("--set-weight", action="append", default=[], metavar="SET=W")
    ap.add_argument("--columns", metavar="FILE", help="a Python file with COLUMNS and columns(example)")
    ap.add_argument("--linear-only", action="store_true", help="keep --columns out of the trees")
    ap.add_argument("--splits", type=int, default=3, help="splits into 5 folds (main: 0.629, 0.656, 0.666)")
    args = ap.parse_args(argv)
    if args.splits < 1:
        ap.error("--splits is at least 1")
    try:
        changes = changes_from(args)
    except KbError as e:
        ap.error(str(e))
    progress = ProgressBar()
    dev, targets, dev_ex, companions, own, _, _ = collect_all(load_settings(), progress)
    rows = screen(changes, (dev, targets, dev_ex, companions, own), args.splits)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
