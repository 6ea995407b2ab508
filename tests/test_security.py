"""Security and dependency faults (docs/reliability.md, cases 5 and 6).

A real `kb serve` on 127.0.0.1 holds an index with a FAQ full of HTML and `<script>`, with an
LLM configured at a local OpenAI-compatible stub that fails in every way (tests/openai_stub.py)
and with fake secrets in its environment. Slack faults use the local Slack Web API stand-in
(tests/slack_stub.py) with the bot in HTTP mode. No secret may appear in any response or log.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import kb_serve, post_json, raw
from openai_stub import OpenAIStub, Reply, closed_port_url
from slack_stub import Call, SlackStub

pytestmark = pytest.mark.slow
needs_llm = pytest.mark.skipif(
    importlib.util.find_spec("langchain_openai") is None,
    reason="needs the llm extra: pip install 'bilingual-kb[llm]'",
)

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


# -- fixtures ------------------------------------------------------------------------------------
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


def llm_reply(request) -> Reply:
    """The stub fails the way the question asks it to."""
    asked = request.prompt_text
    if "[llm-500]" in asked:
        return Reply(status=500)
    if "[llm-401]" in asked:
        return Reply(status=401)
    if "[llm-slow]" in asked:
        return Reply("The shared memory is too small [1].", delay_s=4)
    return Reply(raw=b"<html><body>502 Bad Gateway</body></html>")  # garbage


@pytest.fixture(scope="module")
def llm_stub():
    with OpenAIStub(respond=llm_reply) as stub:
        yield stub


@pytest.fixture(scope="module")
def server(evil_index, llm_stub, tmp_path_factory):
    env = {
        **SECRETS,
        "KB_LLM_MODEL": "stub-model",
        "KB_LLM_BASE_URL": llm_stub.base_url,
        "KB_LLM_TIMEOUT_S": "1",
        "KB_LLM_MAX_RETRIES": "0",
        "GRADIO_TEMP_DIR": str(tmp_path_factory.mktemp("gradio-tmp")),  # uploads land here, not in /tmp
    }
    with kb_serve(evil_index, tmp_path_factory.mktemp("security-log") / "serve.log", env=env) as srv:
        yield srv


def evil_entry(kb):
    return next(e for e in kb.index.entries if e.doc == "evil.md")


# -- 6. binds 127.0.0.1 unless told otherwise ------------------------------------------------------
def listening_addresses(port: int) -> list[str]:
    """Local addresses of the LISTEN sockets on `port`, from /proc/net/tcp and tcp6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            addr, lport = cols[1].split(":")
            if cols[3] == "0A" and int(lport, 16) == port:  # 0A: LISTEN
                if len(addr) == 8:
                    found.append(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    found.append("ipv6:" + addr)
    return found


def test_kb_serve_listens_on_loopback_only(server):
    assert listening_addresses(server.port) == ["127.0.0.1"]


def test_every_door_defaults_to_loopback_and_warns_when_exposed(capsys):
    import inspect

    from kb.doors.cli import build_parser
    from kb.doors.host.app import announce, bind_address
    from kb.doors.host.server import Served

    parser = build_parser()
    assert bind_address(parser.parse_args(["serve"]), 7860) == ("127.0.0.1", 7860)
    assert bind_address(parser.parse_args(["slack"]), 3000) == ("127.0.0.1", 3000)
    assert inspect.signature(Served).parameters["host"].default == "127.0.0.1"
    # Told otherwise, it says so loudly.
    announce("0.0.0.0", 7860)
    assert "reachable from the network, without authentication" in capsys.readouterr().err
    announce("127.0.0.1", 7860)
    assert "reachable from the network" not in capsys.readouterr().err


def test_no_secret_in_any_response_or_in_the_server_log(server):
    for path in ("/api/health", "/", "/config", "/gradio_api/info", "/api/nothing"):
        status, _, body = raw(server.port, "GET", path)
        assert status < 500, (path, status)
        assert_no_secret(body, path)
    status, body = post_json(server.port, "/api/ask", {"query": f"{NCCL_Q} [llm-500]", "history": "x"})
    assert status == 422
    assert_no_secret(json.dumps(body), "an error response")
    assert_no_secret(server.log.read_text(), "the server log")


@needs_llm
@pytest.mark.parametrize("marker", ["[llm-500]", "[llm-401]", "[llm-garbage]", "[llm-slow]", "down"])
def test_llm_failures_are_logged_without_the_key(evil_kb, llm_stub, monkeypatch, caplog, marker):
    """What a server that logs at DEBUG would write (kb.llm, openai, httpx): the failure, not the key."""
    from kb.config import LlmSettings
    from kb.llm import llm_answer

    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    base_url = closed_port_url() if marker == "down" else llm_stub.base_url
    llm = LlmSettings(model="stub-model", base_url=base_url, timeout_s=1.0, max_retries=0)
    with caplog.at_level("DEBUG"):
        answer = llm_answer(evil_kb.search(f"{NCCL_Q} {marker}"), llm)
    assert answer.mode == "extractive" and answer.notice
    assert "LLM answer failed" in caplog.text
    assert_no_secret(caplog.text + answer.notice, f"the log of a failing LLM call ({marker})")


@needs_llm
def test_cli_with_the_llm_down_answers_and_does_not_echo_the_key(evil_index):
    env = {**os.environ, **SECRETS, "KB_LLM_MODEL": "stub-model", "KB_LLM_BASE_URL": closed_port_url()}
    for extra in ((), ("--json",)):
        p = subprocess.run(
            [sys.executable, "-m", "kb", "ask", NCCL_Q, "--index", str(evil_index), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        assert "could not be reached" in p.stdout and "--shm-size 32G" in p.stdout
        assert_no_secret(p.stdout + p.stderr, "kb ask output")


def test_kb_slack_failing_to_reach_slack_does_not_echo_the_tokens(evil_index):
    """No network here: auth.test fails. The error says so, without the tokens."""
    pytest.importorskip("slack_bolt")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kb",
            "slack",
            "--mode",
            "http",
            "--port",
            "0",
            "--index",
            str(evil_index),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **SECRETS},
        timeout=120,
    )
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1].startswith("kb slack: ")
    assert_no_secret(p.stdout + p.stderr, "kb slack output")


# -- 6. the page shows document HTML as text -----------------------------------------------------------
def test_faq_html_is_text_in_the_json_api_and_escaped_in_the_entry_panel(server, evil_kb):
    e = evil_entry(evil_kb)
    assert "<script>alert('faq')</script>" in e.body  # the document really holds it

    status, headers, body = raw(server.port, "GET", f"/api/entry/{e.id}")
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert "<script>alert('faq')</script>" in json.loads(body)["body"]  # a JSON string: data, not markup

    for path in (f"/entry/{e.id}?fragment=1", f"/entry/{e.id}"):
        status, headers, body = raw(server.port, "GET", path)
        page = body.decode()
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert "<script" not in page and "<img" not in page and 'href="javascript:' not in page, path
        assert "&lt;script&gt;alert(" in page and "NCCL_IB_HCA=mlx5" in page
        assert "<b>mlx5</b>" not in page


def test_injection_in_a_query_comes_back_as_text_and_renders_escaped(server, evil_kb):
    from kb.doors.web.render import render_answer, render_user

    query = "<script>alert(document.cookie)</script> NCCL_IB_HCA warning mlx5 in the log [llm-500]"
    status, body = post_json(server.port, "/api/search", {"query": query})
    assert status == 200 and body["query"] == query  # echoed verbatim inside JSON
    assert body["hits"][0]["doc"] == "evil.md"
    # The chat shows the question and the answer (whose source holds <script>) as text.
    shown = render_user(query, "en") + render_answer(evil_kb.ask(query.replace(" [llm-500]", "")))
    assert "<script" not in shown and "&lt;script&gt;" in shown


# -- 6. no path traversal through a parameter that names a document ------------------------------------
TRAVERSALS = [
    "/api/entry/../../etc/passwd",
    "/api/entry/..%2F..%2F..%2Fetc%2Fpasswd",
    "/api/entry/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/api/entry/..%252F..%252Fetc%252Fpasswd",
    "/api/entry/%2Fetc%2Fpasswd",
    "/api/entry/..%2Fmanifest.json",
    "/api/entry/%00",
    "/entry/../../../etc/passwd",
    "/entry/..%2F..%2F..%2Fetc%2Fpasswd?fragment=1",
    "/entry/..%2Fmanifest.json?fragment=1",
    "/gradio_api/file=/etc/passwd",
    "/gradio_api/file=../../../../etc/passwd",
    "/gradio_api/file=%2Fetc%2Fpasswd",
    "/file=/etc/passwd",
    "/static/../../../../etc/passwd",
    "/assets/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_path_traversal(server, evil_index, path):
    status, _, body = raw(server.port, "GET", path)
    text = body.decode("utf-8", "replace")
    assert 400 <= status < 500, (path, status, text[:200])
    assert "root:" not in text and '"generation"' not in text, (path, text[:200])


def test_entry_lookup_is_by_id_not_by_path(server, evil_kb):
    """The only document-naming parameter is an entry id, looked up in the loaded index."""
    e = evil_entry(evil_kb)
    for name in (e.doc, f"../{e.doc}", str(Path(e.doc).resolve())):
        status, _, _ = raw(server.port, "GET", "/api/entry/" + name.replace("/", "%2F"))
        assert status >= 400
    assert raw(server.port, "GET", f"/api/entry/{e.id}")[0] == 200


# -- 6. request body size limits ------------------------------------------------------------------------
# The JSON API's limits (declared length, chunked uploads, query bytes) are proven in
# tests/test_web_api.py::test_oversized_bodies_are_refused; the Slack door's below.


def test_the_chat_refuses_large_uploads(server):
    boundary = "kbtestboundary"
    payload = b"x" * (8 * 1024 * 1024)
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="big.log"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + payload
        + f"\r\n--{boundary}--\r\n".encode()
    )
    status, _, _ = raw(
        server.port,
        "POST",
        "/gradio_api/upload",
        body,
        {"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert status == 413


def test_the_chat_refuses_oversized_bodies(server):
    body = json.dumps(
        {"data": ["x" * (12 * 1024 * 1024), [], [], "auto"], "fn_index": 0, "session_hash": "s"}
    )
    status, _, _ = raw(
        server.port, "POST", "/gradio_api/queue/join", body.encode(), {"Content-Type": "application/json"}
    )
    assert status == 413


# -- Slack: signature verification, body limit, 5xx from the Slack API -----------------------------------
@dataclass
class FlakySlack(SlackStub):
    """The Slack stand-in, able to answer a method with a server error (tests/slack_stub.py
    already does 429 + Retry-After)."""

    _failures: dict = field(default_factory=dict)

    def fail(self, method: str, status: int, times: int = 1) -> None:
        with self._lock:
            self._failures.setdefault(method, []).extend([status] * times)

    def answer(self, method: str, params: dict, token: str):
        with self._lock:
            pending = self._failures.get(method)
            if pending:
                status = pending.pop(0)
                self.calls.append(Call(method, params, time.monotonic(), status, token))
                return status, {}, {"ok": False, "error": "fatal_error"}
        return super().answer(method, params, token)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._failures.clear()


@pytest.fixture(scope="module")
def slack(evil_kb):
    pytest.importorskip("slack_bolt")
    from helpers import slack_http
    from slack_sdk import WebClient

    from kb.doors.slack.bot import SlackBot

    stub = FlakySlack(token=SECRETS["SLACK_BOT_TOKEN"]).start()
    bot = SlackBot(
        evil_kb,
        signing_secret=SECRETS["SLACK_SIGNING_SECRET"],
        client=WebClient(token=stub.token, base_url=stub.api_url),
    )
    server = slack_http(bot).start()
    yield bot, stub, f"http://127.0.0.1:{server.address[1]}/slack/events"
    server.stop()
    bot.close()
    stub.stop()


@pytest.fixture
def bot(slack):
    bot, stub, url = slack
    stub.reset()
    return bot, stub, url


def _event(text: str, thread_ts: str | None = None) -> dict:
    from helpers import mention

    return mention(text, thread_ts=thread_ts)


def _post(url: str, event: dict, **kw):
    from helpers import post_event

    return post_event(url, event, secret=kw.pop("secret", SECRETS["SLACK_SIGNING_SECRET"]), **kw)


def test_slack_requests_without_a_valid_signature_are_rejected(bot):
    """tests/test_slack.py rejects a wrong secret and an old timestamp; these are the other ways."""
    app, stub, url = bot
    port = urlsplit(url).port
    body = json.dumps({"type": "event_callback", "event": _event(NCCL_Q), "event_id": "EvNOSIG"}).encode()
    now = str(int(time.time()))
    signed_for_other_body = (
        "v0="
        + hmac.new(
            SECRETS["SLACK_SIGNING_SECRET"].encode(), f"v0:{now}:{{}}".encode(), hashlib.sha256
        ).hexdigest()
    )
    for headers in (
        {},  # no signature at all
        {"X-Slack-Request-Timestamp": now},  # a timestamp, no signature
        {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": signed_for_other_body},  # tampered body
    ):
        status, _, _ = raw(
            port, "POST", "/slack/events", body, {"Content-Type": "application/json", **headers}
        )
        assert status == 401, headers
    assert app.wait_idle(30) and stub.calls == []  # nothing was read, posted or reacted to


def test_slack_event_bodies_over_the_limit_are_refused(bot):
    from kb.doors.slack.events import MAX_EVENT_BODY

    app, stub, url = bot
    status, _, _ = raw(
        urlsplit(url).port,
        "POST",
        "/slack/events",
        b"{" + b" " * MAX_EVENT_BODY + b"}",
        {"Content-Type": "application/json"},
    )
    assert status == 413 and stub.calls == []


def test_slack_5xx_on_reading_the_thread_still_answers(bot):
    app, stub, url = bot
    stub.fail("conversations.replies", 500)
    assert _post(url, _event(NCCL_Q, thread_ts="1710000000.000001"))[0] == 200
    [post] = stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    assert stub.of("conversations.replies", status=500)
    assert "shm-size" in json.dumps(post.params)


def test_slack_persistent_5xx_is_logged_and_the_bot_recovers(bot, caplog):
    app, stub, url = bot
    stub.fail("chat.postMessage", 503, times=10)
    with caplog.at_level("ERROR", logger="kb.slack"):
        assert _post(url, _event(NCCL_Q))[0] == 200
        assert app.wait_idle(60)
    assert any("chat.postMessage" in r.getMessage() for r in caplog.records)
    assert_no_secret(caplog.text, "the bot's log")
    stub.reset()  # Slack is back: the next question is answered
    assert _post(url, _event(NCCL_Q))[0] == 200
    assert stub.wait_for("chat.postMessage") and app.wait_idle(30)


def test_slack_transient_503_on_posting_the_answer_is_retried(bot):
    app, stub, url = bot
    stub.fail("chat.postMessage", 503, times=1)
    assert _post(url, _event(NCCL_Q))[0] == 200
    assert app.wait_idle(60)
    assert len(stub.of("chat.postMessage")) == 1  # delivered on the retry


def test_slack_wrong_token_error_does_not_echo_it(evil_kb):
    pytest.importorskip("slack_bolt")
    from slack_sdk import WebClient

    from kb.doors.slack.bot import SlackBot
    from kb.errors import KbError

    stub = SlackStub().start()  # its token is not ours: auth.test answers invalid_auth
    try:
        with pytest.raises(KbError) as err:
            SlackBot(
                evil_kb,
                signing_secret="s",
                client=WebClient(token=SECRETS["SLACK_BOT_TOKEN"], base_url=stub.api_url),
            )
    finally:
        stub.stop()
    assert "invalid_auth" in str(err.value)
    assert_no_secret(str(err.value), "the wrong-token error")
