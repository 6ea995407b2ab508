"""eval/screen.py: a change to the fit screened against main on the same searches and splits."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from evaluation import fitting
from evaluation.crossval import Example
from evaluation.gold import Expected, GoldRow
from index.search import Candidates
from kb.errors import KbError

spec = importlib.util.spec_from_file_location("screen", ROOT / "eval" / "screen.py")
screen = importlib.util.module_from_spec(spec)
sys.modules["screen"] = screen  # its dataclasses look their module up
spec.loader.exec_module(screen)


def _example(rid: str, n: int) -> Example:
    row = GoldRow(rid, "q", "en", "exact", (Expected("a.md", line=1),), kb="seeds")
    c = Candidates(None, "en", [], np.arange(n), np.ones((n, 2), dtype=np.float32), np.zeros(n), {}, {}, {},
                   names=("a", "b"))  # fmt: skip
    return Example("real_dev", row, "seeds", None, c, np.zeros(n, dtype=bool), 0.0, real=True)


def test_settings_are_read_as_numbers_flags_or_words():
    assert screen.setting("path_smooth=1") == ("path_smooth", 1)
    assert screen.setting("reg_lambda=0.5") == ("reg_lambda", 0.5)
    assert screen.setting("extra_trees=True") == ("extra_trees", True)
    assert screen.setting("boosting = dart") == ("boosting", "dart")
    for bad in ("path_smooth", "=1", "path_smooth="):
        with pytest.raises(KbError, match="NAME=VALUE"):
            screen.setting(bad)


def test_a_change_holds_only_while_it_is_screened_even_when_the_fit_fails():
    before = dict(fitting.TREE_PARAMS)
    with pytest.raises(RuntimeError):
        with screen.patched(fitting.TREE_PARAMS, {"path_smooth": 1.0, "num_leaves": 3}):
            assert fitting.TREE_PARAMS["num_leaves"] == 3 and fitting.TREE_PARAMS["path_smooth"] == 1.0
            raise RuntimeError("fit failed")
    assert fitting.TREE_PARAMS == before
    left_out = fitting.TREES_LEAVE_OUT
    with screen.kept_out_of_trees(("doc_x",)):
        assert fitting.TREES_LEAVE_OUT == (*left_out, "doc_x")
    assert fitting.TREES_LEAVE_OUT == left_out


def test_columns_are_appended_to_every_candidate_under_their_names():
    examples = [_example("p1", 3), _example("p2", 0)]
    out = screen.with_columns(examples, ("c",), lambda ex: np.arange(len(ex.candidates.entries)) + 5)
    assert out[0].candidates.names == ("a", "b", "c")
    assert out[0].candidates.x[:, 2].tolist() == [5, 6, 7]
    assert out[0].candidates.x[:, :2].tolist() == examples[0].candidates.x.tolist(), "the old columns stay"
    assert out[1].candidates.x.shape == (0, 3), "a post without candidates gets none"
    assert examples[0].candidates.names == ("a", "b"), "the searches themselves are not changed"


def test_main_and_every_change_are_cross_validated_on_the_same_searches_and_splits(monkeypatch):
    dev_ex = [_example(f"p{i}", 2) for i in range(4)]
    seen = []

    def cross_validate(dev, own, k, seed, companions):
        seen.append((seed, [id(ex.row) for ex in dev], dict(fitting.TREE_PARAMS), dev[0].candidates.names))
        return {i: None for i in range(len(dev))}, [i % 2 for i in range(len(dev))], []

    def judge_all(gold, by_row, targets, k):
        # Hit@1 is 1 when the trees are changed, 0.5 on main: what the table must tell apart.
        hit = 1.0 if fitting.TREE_PARAMS.get("path_smooth") else 0.5
        return [type("J", (), {"row": ex.row, "hit": hit})() for ex in dev_ex]

    monkeypatch.setattr(screen, "_judge_all", judge_all)
    monkeypatch.setattr(screen, "grouped", lambda js, k: {"overall": {"hit@1": js[0].hit}})
    changes = [
        screen.Change("trees", lambda: screen.patched(fitting.TREE_PARAMS, {"path_smooth": 1.0})),
        screen.Change("cols", columns=("c",), compute=lambda ex: np.zeros(len(ex.candidates.entries))),
    ]
    rows = screen.screen(changes, (None, {}, dev_ex, [], []), 2, cross_validate, report=lambda s: None)
    assert [r["change"] for r in rows] == ["main", "trees", "cols"]
    assert [r["hit@1"] for r in rows] == [0.5, 1.0, 0.5]
    assert [r["split_hit@1"] for r in rows][1] == [1.0, 1.0]
    assert [s[0] for s in seen] == [0, 1] * 3, "every change over the same splits"
    assert all(s[1] == seen[0][1] for s in seen), "every change on the same posts, in the same order"
    assert seen[2][2].get("path_smooth") == 1.0 and "path_smooth" not in seen[4][2]
    assert seen[4][3] == ("a", "b", "c") and seen[0][3] == ("a", "b")
    table = screen.table(rows)
    assert "| trees | 1.000 |" in table and "| main | 0.500 |" in table


def test_the_command_line_says_what_is_wrong_before_searching():
    run = [sys.executable, str(ROOT / "eval" / "screen.py")]
    for args, said in (
        ([], "nothing to screen"),
        (["--tree-param", "path_smooth"], "NAME=VALUE"),
        (["--set-weight", "seeds=much"], "the weight is a number"),
        (["--trees-leave-out", "dense_max,no_such"], "not features of the ranking: ['no_such']"),
        (["--columns", str(ROOT / "README.md")], "not a Python file"),
    ):
        done = subprocess.run(run + args, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr


def test_a_tree_setting_overrides_what_the_ranker_is_built_with():
    import lightgbm

    assert fitting.tree_ranker(lightgbm).get_params()["lambdarank_truncation_level"] == 10
    with screen.patched(fitting.TREE_PARAMS, {"lambdarank_truncation_level": 3, "path_smooth": 1.0}):
        params = fitting.tree_ranker(lightgbm).get_params()
    assert params["lambdarank_truncation_level"] == 3 and params["path_smooth"] == 1.0
    assert params["objective"] == "lambdarank", "what is not changed stays"
