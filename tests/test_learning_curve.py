"""eval/learning_curve.py: the cross-validation fitted on a share of the training posts, to see how
the numbers grow with the labelled posts (evaluation/folds.py kept_share, crossval.train_share)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter

import pytest
from conftest import ROOT, needs_shared

from evaluation import crossval
from evaluation.crossval import Example
from evaluation.folds import kept_share
from evaluation.gold import Expected, GoldRow


def _row(rid: str, kb: str | None, answerable: bool = True) -> GoldRow:
    expected = (Expected("a.md", line=1),) if answerable else ()
    return GoldRow(rid, "q", "en", "exact" if answerable else "none", expected, kb=kb)


ROWS = [
    *(_row(f"s{i}", "seeds") for i in range(40)),
    *(_row(f"c{i}", "corpus") for i in range(20)),
    *(_row(f"u{i}", None, answerable=False) for i in range(10)),
]


def _stratum(rid: str) -> str:
    return {"s": "seeds", "c": "corpus", "u": "none"}[rid[0]]


def test_a_share_of_the_posts_keeps_each_knowledge_base_and_the_unanswerable_in_proportion():
    kept = kept_share(ROWS, 0.25, seed=3)
    assert Counter(map(_stratum, kept)) == {"seeds": 10, "corpus": 5, "none": 2}  # 2.5 rounds to even
    assert kept == kept_share(ROWS, 0.25, seed=3), "the same seed keeps the same posts"
    assert kept != kept_share(ROWS, 0.25, seed=4)
    assert kept_share(ROWS, 1.0, seed=3) == {r.id for r in ROWS}
    # A stratum is never left out, however small the share.
    assert Counter(map(_stratum, kept_share(ROWS, 0.01, seed=0))) == {"seeds": 1, "corpus": 1, "none": 1}
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match=r"in \(0, 1\]"):
            kept_share(ROWS, bad, seed=0)


def test_each_fold_is_fitted_on_its_share_of_the_other_folds_posts_with_their_searches(monkeypatch):
    dev = [Example("real_dev", r, r.kb, None, None, None, 0.0, real=True) for r in ROWS]
    docs = [Example("real_dev_docs", r, "one.md", None, None, None, 0.0, gate_only=True) for r in ROWS]
    own = [Example("seeds", _row("own1", None), None, None, None, None, 0.0)]
    trained: list[list[Example]] = []

    def fit(train):
        trained.append(list(train))
        return len(trained) - 1

    monkeypatch.setattr(crossval, "fit", fit)
    monkeypatch.setattr(crossval, "decide", lambda ex, model, k: model)
    for share in (1.0, 0.5):
        trained.clear()
        fitted_on: list[int] = []
        outcomes, folds, _ = crossval.cross_validate(
            dev, own, 5, companions=docs, train_share=share, fitted_on=fitted_on
        )
        assert len(outcomes) == len(dev), "every post is still scored, whatever the share"
        fold_of = {ex.row.id: f for ex, f in zip(dev, folds, strict=True)}
        for f, train in enumerate(trained):
            posts = {ex.row.id for ex in train if ex.set_name == "real_dev"}
            searches = {ex.row.id for ex in train if ex.gate_only}
            others = [r.id for r in ROWS if fold_of[r.id] != f]
            assert not any(fold_of[p] == f for p in posts), "never fitted on a post it scores"
            assert searches == posts, "a post's one-document searches go with it"
            assert [ex.row.id for ex in train if ex.set_name == "seeds"] == ["own1"], "our own sets stay"
            # 32 seeds posts, 16 corpus and 8 unanswerable in the other four folds: half of each.
            assert len(others) == 56 and len(posts) == round(share * 56)
        counted = [len({ex.row.id for ex in t if ex.set_name == "real_dev"}) for t in trained]
        assert fitted_on == counted, "the posts each fold was fitted on, as the curve reports them"


def _curve_module():
    spec = importlib.util.spec_from_file_location("learning_curve", ROOT / "eval" / "learning_curve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gain_per_doubling_and_where_the_line_would_reach_the_target():
    curve = _curve_module()
    points = [
        {"posts": n, "plain": {"hit@1": h}, "with_precedents": {"hit@1": None}}
        for n, h in ((25, 0.50), (50, 0.55), (100, 0.60))
    ]
    trend = curve.per_doubling(points, "plain")
    assert trend["per_doubling"] == pytest.approx(0.05)
    # 0.60 at 100 posts, 0.05 a doubling: 0.75 three doublings later.
    assert trend["posts_at_target"] == 800
    assert curve.per_doubling(points, "with_precedents") is None, "no numbers, no line"
    report = {"measured_at": "now", "embedder": "e", "splits": 1, "seconds": 1.0, "trend": {"plain": trend},
              "points": [{**p, "share": 1.0, "fold_sd_hit@1": 0.1, "plain": {k: 0.5 for k in curve.KEYS},
                          "with_precedents": {k: None for k in curve.KEYS}} for p in points]}  # fmt: skip
    assert "at about 800 posts fitted on (an extrapolation past the measured points" in curve.render(report)
    flat = [{"posts": n, "plain": {"hit@1": 0.6}} for n in (25, 50)]
    assert "posts_at_target" not in curve.per_doubling(flat, "plain"), "a flat line reaches nothing"


def test_the_curve_refuses_shares_outside_the_training_posts():
    for bad in (["--shares", "0"], ["--shares", "0.5", "2"], ["--splits", "0"]):
        done = subprocess.run(
            [sys.executable, "eval/learning_curve.py", *bad], capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode == 2 and ("(0, 1]" in done.stderr or "at least 1" in done.stderr), done.stderr


@pytest.mark.slow
@needs_shared
def test_the_curve_on_the_real_posts_scores_the_same_posts_at_every_share(tmp_path):
    done = subprocess.run(
        [sys.executable, "eval/learning_curve.py", "--shares", "0.5", "1", "--splits", "1",
         "--results", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "learning_curve.json").read_text("utf-8"))
    half, whole = report["points"]
    assert (half["share"], whole["share"]) == (0.5, 1.0)
    # 139 posts in 5 folds: a fold is fitted on the other four fifths, or half of them.
    assert whole["posts"] == pytest.approx(139 * 4 / 5, abs=1) and half["posts"] == pytest.approx(
        whole["posts"] / 2, abs=2
    )
    for p in (half, whole):
        for model in ("plain", "with_precedents"):
            assert 0.3 < p[model]["hit@1"] <= p[model]["hit@5"] <= 1.0
    # The whole share is `kb eval --splits 1`'s own cross-validation (Hit@1 0.629 when measured).
    assert whole["plain"]["hit@1"] > 0.55
    text = (tmp_path / "learning_curve.md").read_text("utf-8")
    assert "| 0.5 |" in text and "| 1 |" in text and "per doubling" in text
