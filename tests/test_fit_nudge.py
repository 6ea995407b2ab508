"""`eval/fit.py --nudge SEED`: refit with every feature but whole numbers moved by about 1e-5 of
itself, to see how far a refit's numbers move by chance (eval/results/fit_spread.md)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, needs_shared

from evaluation.crossval import NUDGE, Example, nudged
from index.ranker import MODELS_DIR, load_model


@dataclass
class Found:
    """The one field of index.search.Candidates that nudged moves."""

    x: np.ndarray


def example(x: np.ndarray) -> Example:
    row = SimpleNamespace(id="r1", expected=[], answerable=False)
    return Example("real_dev", row, None, None, Found(x), np.zeros(len(x), dtype=bool), 0.0)


def features() -> np.ndarray:
    x = np.random.default_rng(7).uniform(0.1, 3.0, (6, 5)).astype(np.float32)
    x[:, 2] = 0.0  # an absent evidence (no code match, say)
    x[:, 3] = np.arange(1, 7)  # a rank
    return x


def test_nudge_moves_every_feature_by_a_hair_but_whole_numbers_and_leaves_the_input_alone():
    x = features()
    before = x.copy()
    (moved,) = nudged([example(x)], seed=1)
    y = moved.candidates.x
    assert y.dtype == np.float32 and y.shape == x.shape
    assert np.array_equal(x, before), "the examples given are not changed"
    assert np.all(y[:, 2] == 0.0) and np.array_equal(y[:, 3], x[:, 3])
    fractional = x != np.round(x)
    assert fractional.sum() == 6 * 3
    relative = np.abs(y[fractional] / x[fractional] - 1)
    assert relative.max() < 10 * NUDGE and (relative > 0).mean() > 0.9


def test_nudge_is_the_same_for_a_seed_and_another_for_another_seed():
    a = nudged([example(features()), example(features())], seed=3)
    b = nudged([example(features()), example(features())], seed=3)
    c = nudged([example(features()), example(features())], seed=4)
    assert all(np.array_equal(p.candidates.x, q.candidates.x) for p, q in zip(a, b, strict=True))
    assert not np.array_equal(a[0].candidates.x, c[0].candidates.x)
    # One draw in order: the second example does not repeat the first one's nudge.
    fractional = features() != np.round(features())
    first, second = (e.candidates.x[fractional] / features()[fractional] for e in a)
    assert not np.allclose(first, second, rtol=0, atol=NUDGE / 100)


def test_a_search_without_candidates_passes_through():
    empty = example(np.zeros((0, 5), dtype=np.float32))
    (out,) = nudged([empty], seed=1)
    assert out is empty


def fit(args: list[str], home) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "eval/fit.py", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KB_HOME": str(home)},
        cwd=ROOT,
        timeout=1800,
    )


def test_a_nudged_fit_is_not_written_over_the_shipped_model(tmp_path):
    refused = fit(["--nudge", "1"], tmp_path)
    assert refused.returncode == 2 and "--nudge needs --out" in refused.stderr


def digest(path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


@pytest.mark.slow
@needs_shared
def test_a_nudged_refit_says_so_in_its_model_and_its_report(tmp_path):
    shipped = MODELS_DIR / "usem3.json"
    before = digest(shipped)
    out = tmp_path / "nudged" / "usem3.json"
    done = fit(["--nudge", "1", "--repeats", "1", "--out", str(out)], tmp_path / "home")
    assert done.returncode == 0, done.stderr[-2000:]
    assert digest(shipped) == before, "the shipped model is left as it is"
    model = load_model(str(out))
    assert model.meta["nudge"] == {"seed": 1, "share": NUDGE}
    report = json.loads((out.parent / "fit.json").read_text("utf-8"))
    assert report["nudge"]["seed"] == 1 and report["cv"]["folds"][0]["overall"]["queries"] > 0
    assert "Nudged (`--nudge 1`)" in (out.parent / "fit.md").read_text("utf-8")
