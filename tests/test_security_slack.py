"""The Slack door against hostile requests and a failing Slack: unsigned or tampered requests,
bodies over the limit, 5xx from the Web API, and tokens that must never be echoed."""

import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from conftest import NCCL_Q, SECRETS, assert_no_secret
from helpers import raw
from slack_stub import Call, SlackStub

pytestmark = pytest.mark.slow


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
        {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=" + "0" * 64},  # was a 500
        {"X-Slack-Request-Timestamp": "1e9", "X-Slack-Signature": "v0=" + "0" * 64},
        {
            "X-Slack-Request-Timestamp": "\u00b2",
            "X-Slack-Signature": "v0=" + "0" * 64,
        },  # isdigit(), not int()
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
