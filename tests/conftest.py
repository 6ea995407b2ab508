"""Shared fixtures (real indexes built once per session from the seeds and the bundled KB), the
home every test runs in, and which tests run.

Slow tests (a real model, a real index, a server, a browser) are skipped by a plain local
`python -m pytest`, so the rest runs in well under a minute; CI (CI=true) runs them all, and so
does `--slow` locally, or any `-m` expression, or naming the tests to run. Helpers live in
tests/helpers.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KB_SHARED", ROOT.parent / "shared"))
SEEDS = SHARED / "seeds"
CORPUS = SHARED / "corpus"

needs_shared = pytest.mark.skipif(
    not SEEDS.is_dir(), reason=f"{SEEDS} not present (../shared beside the checkout)"
)


def pytest_addoption(parser) -> None:
    parser.addoption("--slow", action="store_true", help="also run the slow tests (CI=true does too)")


def pytest_configure(config) -> None:
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    named = any(
        not a.startswith("-") and ("::" in a or a.endswith(".py")) for a in config.invocation_params.args
    )
    if not (ci or named or config.getoption("--slow") or config.option.markexpr):
        config.option.markexpr = "not slow"


# Every place kb reads or writes outside the checkout, moved into the session's folder: the
# developer's index, config, model cache and evaluation cache are never read or written.
_HOME_VARIABLES = ("HOME", "KB_HOME", "KB_MODEL_CACHE", "KB_EVAL_CACHE", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory):
    """A home of the session's own, and no KB_* setting of the developer's (the shared folder
    aside: the tests read the real documents)."""
    home = tmp_path_factory.mktemp("kbhome")
    old = dict(os.environ)
    for name in [n for n in os.environ if n.startswith("KB_") and n != "KB_SHARED"]:
        del os.environ[name]
    for name in _HOME_VARIABLES:
        os.environ[name] = str(home / name.lower())
    os.environ["HOME"] = str(home)
    yield home
    os.environ.clear()
    os.environ.update(old)


@pytest.fixture(scope="session")
def seeds_index(tmp_path_factory) -> Path:
    """An index of ../shared/seeds, built with the real default embedder."""
    if not SEEDS.is_dir():
        pytest.skip(f"{SEEDS} not present")
    from kb.indexing import ingest

    out = tmp_path_factory.mktemp("seeds-index")
    ingest([str(SEEDS)], out)
    return out


@pytest.fixture(scope="session")
def seeds_kb(seeds_index):
    from kb.service import KnowledgeBase

    return KnowledgeBase.open(index=str(seeds_index))


@pytest.fixture(scope="session")
def bundled_kb():
    from kb.service import KnowledgeBase

    return KnowledgeBase.open()
