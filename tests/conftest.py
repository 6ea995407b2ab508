"""Shared fixtures (real indexes built once per session from the seeds and the bundled KB), the
home every test runs in, and which tests run.

Slow tests (a real model, a real index, a server, a browser) are skipped by a plain local
`python -m pytest`, so the rest runs in well under a minute; CI (CI=true) runs them all, and so
does `--slow` locally, or any `-m` expression, or naming the tests to run. Helpers live in
tests/helpers.py.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from helpers import SECRET, slack_client
from slack_stub import SlackStub

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


@pytest.fixture(scope="module")
def stub():
    s = SlackStub().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def bot_url(stub, seeds_kb):
    """The bot in HTTP mode on 127.0.0.1, talking to the stand-in."""
    from helpers import slack_http

    from kb.doors.slack.bot import SlackBot

    bot = SlackBot(seeds_kb, signing_secret=SECRET, client=slack_client(stub))
    server = slack_http(bot).start()
    yield bot, f"http://127.0.0.1:{server.address[1]}/slack/events"
    server.stop()
    bot.close()


@pytest.fixture
def bot(bot_url, stub):
    stub.reset()
    return bot_url


@pytest.fixture(scope="module")
def evil_index(tmp_path_factory) -> Path:
    from kb.indexing import ingest

    docs = tmp_path_factory.mktemp("evil-docs")
    (docs / "evil.md").write_text(EVIL_FAQ)
    (docs / "good.md").write_text(GOOD_FAQ)
    index = tmp_path_factory.mktemp("evil-index") / "index"
    ingest([str(docs)], index)
    return index


@pytest.fixture(scope="module")
def evil_kb(evil_index):
    from kb.service import KnowledgeBase

    return KnowledgeBase.open(index=str(evil_index))


SECRETS = {
    "OPENAI_API_KEY": "sk-kbtest-" + secrets.token_hex(16),
    "SLACK_BOT_TOKEN": "xoxb-kbtest-" + secrets.token_hex(12),
    "SLACK_SIGNING_SECRET": "kbtest-signing-" + secrets.token_hex(12),
    "SLACK_APP_TOKEN": "xapp-kbtest-" + secrets.token_hex(12),
}


EVIL_FAQ = """\
# Exported FAQ <script>alert('heading')</script>

## Q: NCCL_IB_HCA warning <b>mlx5</b> in the log?

A: Set `NCCL_IB_HCA=mlx5` and read the log again.

<script>alert('faq')</script>

<img src=x onerror="alert(2)">

[open the console](javascript:alert(3))

```bash
export NCCL_IB_HCA=mlx5
```
"""


GOOD_FAQ = """\
## Q: NCCL error(2) unhandled system error in Docker?

A: The container's shared memory is too small; start it with `--shm-size 32G`.

```bash
docker run --shm-size 32G my-image
```
"""


NCCL_Q = "ExternalError: Nccl error(2), unhandled system error while training in docker"


def assert_no_secret(text: str | bytes, where: str) -> None:
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    for name, value in SECRETS.items():
        assert value not in text, f"{name} leaked into {where}"
        assert value[-12:] not in text, f"part of {name} leaked into {where}"
