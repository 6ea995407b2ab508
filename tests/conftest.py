"""Shared fixtures: real indexes built once per session from the seeds and the bundled KB."""

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


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory):
    """Keep the bundled index and config of the developer's machine out of the tests."""
    home = tmp_path_factory.mktemp("kbhome")
    old = {k: os.environ.get(k) for k in ("KB_HOME", "KB_INDEX", "KB_CONFIG")}
    os.environ["KB_HOME"] = str(home)
    os.environ.pop("KB_INDEX", None)
    os.environ.pop("KB_CONFIG", None)
    yield home
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


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
