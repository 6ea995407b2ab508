"""Slack's HTTP mode on the HTTP host (kb/doors/slack/events.py, kb/doors/host/): signatures, replays,
body limits, malformed bodies, slow and bursty clients, the mounted route, and the `kb slack` command."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
from contextlib import contextmanager
from urllib.parse import urlencode

import pytest
from conftest import ROOT
from helpers import (
    SECRET,
    mention,
    post_event,
    reply_text,
    signed_post,
    slack_client,
    stderr_lines,
    wait_for_line,
)
from slack_stub import TEAM


def test_bad_signature_or_old_timestamp_is_rejected(bot, stub):
    app, url = bot
    status, _, _ = post_event(url, mention("ExternalError: Nccl error(2)"), secret="not-the-secret")
    assert status == 401
    status, _, _ = post_event(
        url, mention("ExternalError: Nccl error(2)"), timestamp=int(time.time()) - 6 * 60
    )
    assert status == 401
    assert app.wait_idle(30)
    assert stub.calls == []  # no reply, no reaction, nothing read


def _exchange(url: str, request: bytes, timeout: float = 10.0) -> tuple[bytes, bool]:
    """Send raw bytes on one kept-alive connection; (all bytes answered, whether the server
    closed the connection) once it closes or goes quiet for `timeout` seconds."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return data, True
            except TimeoutError:
                return data, False
            if not chunk:
                return data, True
            data += chunk


@pytest.mark.parametrize(
    "head",
    [
        "Content-Length: {over}",  # too large: 413
        "Content-Length: -1",  # would have read until the client closed
        "Transfer-Encoding: chunked",  # http.server cannot read it
    ],
)
def test_refused_body_closes_the_connection(bot, stub, head):
    """A body the HTTP-mode server refuses unread must not be parsed as a next request on a
    kept-alive connection: here it is one, a GET that would answer 200."""
    from kb.doors.slack.events import MAX_EVENT_BODY

    app, url = bot
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    request = (
        f"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{head.format(over=MAX_EVENT_BODY + 1)}\r\n\r\n"
    ).encode() + smuggled
    data, closed = _exchange(url, request)
    assert data.startswith((b"HTTP/1.1 413", b"HTTP/1.1 400", b"HTTP/1.1 411")), data[:100]
    assert data.count(b"HTTP/1.1 ") == 1 and b"\r\n\r\nok" not in data, data
    assert closed and b"connection: close" in data.lower()  # header names are case-insensitive
    assert stub.calls == []


@contextmanager
def _serving(web, bot):
    """`web` served by uvicorn in a thread on a free port of 127.0.0.1 (its base URL); on exit the
    server stops and the bot's workers are closed."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(web, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        bot.close()


def test_mount_serves_http_mode_inside_a_fastapi_app(stub, seeds_kb, monkeypatch):
    fastapi = pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from kb.doors.slack.events import mount
    from kb.errors import KbError

    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", stub.token)
    with pytest.raises(KbError, match="SLACK_SIGNING_SECRET"):
        mount(fastapi.FastAPI(), seeds_kb, client=slack_client(stub))
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    web = fastapi.FastAPI()
    bot = mount(web, seeds_kb, client=slack_client(stub))
    with _serving(web, bot) as base:
        url = base + "/slack/events"
        stub.reset()
        status, body, _ = signed_post(
            url, json.dumps({"type": "url_verification", "challenge": "c-123"}), "application/json"
        )
        assert status == 200 and "c-123" in body
        assert signed_post(url, "{}", "application/json", secret="wrong")[0] == 401
        # Not UTF-8, unsigned: refused by the signature check, not a decoding error (500).
        bad = urllib.request.Request(url, data=b"\xff\xfe{", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=10)
        assert refused.value.code == 401
        # Over the limit, declared or chunked: 413 (bounded while reading, like the web door's).
        from kb.doors.slack.events import MAX_EVENT_BODY

        big = urllib.request.Request(url, data=b" " * (MAX_EVENT_BODY + 1), method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(big, timeout=10)
        assert refused.value.code == 413
        chunks = iter([b" " * 65536] * (MAX_EVENT_BODY // 65536 + 2))
        streamed = urllib.request.Request(
            url, data=chunks, method="POST", headers={"Transfer-Encoding": "chunked"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(streamed, timeout=10)
        assert refused.value.code == 413
        event = mention("ExternalError: Nccl error(2), unhandled system error")
        assert post_event(url, event)[0] == 200
        [post] = stub.wait_for("chat.postMessage")
        assert bot.wait_idle(30)
        assert post.params["thread_ts"] == event["ts"] and "NCCL error(2)" in reply_text(post)


def _kb_slack(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    return subprocess.run(
        [sys.executable, "-m", "kb", "slack", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("args", "env", "named", "not_named"),
    [
        (("--mode", "socket"), {}, ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"], ["SLACK_SIGNING_SECRET"]),
        (("--mode", "http"), {"SLACK_BOT_TOKEN": "xoxb-1"}, ["SLACK_SIGNING_SECRET"], ["SLACK_APP_TOKEN"]),
        # socket mode by default when SLACK_APP_TOKEN is set, else http
        ((), {"SLACK_APP_TOKEN": "xapp-1"}, ["SLACK_BOT_TOKEN"], ["SLACK_SIGNING_SECRET"]),
        ((), {}, ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"], ["SLACK_APP_TOKEN"]),
        (("--mode", "socket"), {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-2"}, ["xapp-"], []),
    ],
)
def test_kb_slack_names_the_missing_token(args, env, named, not_named):
    done = _kb_slack(*args, **env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("kb slack: ")
    first_clause = done.stderr.split(";")[0]  # what is missing; the rest says what the mode needs
    assert all(name in first_clause for name in named)
    assert not any(name in first_clause for name in not_named)


def test_kb_slack_http_mode_end_to_end(stub, seeds_index):
    """The real command: `kb slack --mode http` in a subprocess, Web API calls to the stand-in."""
    stub.reset()
    env = {"SLACK_BOT_TOKEN": stub.token, "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": stub.api_url}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    args = ["slack", "--mode", "http", "--host", "127.0.0.1", "--port", "0", "--index", str(seeds_index)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kb", *args],
        env={**clean, **env},
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    lines = stderr_lines(proc)
    try:
        url = wait_for_line(proc, lines, r"listening on (\S+)", 90).group(1)
        event = mention("ExternalError: Nccl error(2), unhandled system error")
        assert post_event(url, event)[0] == 200
        [post] = stub.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == event["ts"] and "NCCL error(2)" in reply_text(post)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 130 and "Traceback" not in "".join(lines)


def test_manifest_declares_the_scopes_events_and_command():
    yaml = pytest.importorskip("yaml")
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yml").read_text())
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "app_mentions:read", "chat:write", "reactions:write", "im:history",
        "channels:history", "groups:history", "commands", "files:read",
    }  # fmt: skip
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_mention", "message.im", "message.channels", "message.groups",
    }  # fmt: skip
    assert manifest["settings"]["interactivity"]["is_enabled"] is True  # the feedback buttons
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/kb"]


def test_cli_help_does_not_import_slack():
    code = "import sys, kb.doors.cli; kb.doors.cli.build_parser(); print(any(m.startswith('slack') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "False"


def test_a_replayed_slash_command_is_answered_once(bot, stub):
    """The same signed body and timestamp sent again within bolt's 5 minutes: answered once."""
    app, url = bot
    form = {
        "command": "/kb",
        "text": "ExternalError: Nccl error(2), unhandled system error",
        "channel_id": "CGENERAL",
        "user_id": "UALICE",
        "team_id": TEAM,
        "response_url": stub.url + "/respond",
        "trigger_id": "9.8.7",
    }
    ts = int(time.time())
    for _ in range(3):
        status, _, _ = signed_post(url, urlencode(form), "application/x-www-form-urlencoded", timestamp=ts)
        assert status == 200
    stub.wait_for("chat.update")
    assert app.wait_idle(30)
    time.sleep(0.5)
    assert len(stub.of("chat.update")) == 1
    assert len(stub.of("chat.postMessage")) == 2  # the question and its "searching..." placeholder
    # A new request (new timestamp, so a new signature) with the same text is answered again.
    assert signed_post(url, urlencode(form), "application/x-www-form-urlencoded", timestamp=ts + 1)[0] == 200
    assert app.wait_idle(30) and len(stub.wait_for("chat.update", count=2)) == 2


MALFORMED_BODIES = [
    ("{not json", "application/json"),
    ("[1, 2]", "application/json"),
    ("null", "application/json"),
    ('{"type": "event_callback", "event": "not an object"}', "application/json"),
    ("payload=%7Bbroken", "application/x-www-form-urlencoded"),
    ("payload=%5B%5D", "application/x-www-form-urlencoded"),
]


def test_validly_signed_malformed_bodies_get_400_and_the_server_stays_up(bot, stub):
    """`kb slack` dropped the connection with a traceback on these; now a 400 that says why."""
    app, url = bot
    for body, ctype in MALFORMED_BODIES:
        status, text, _ = signed_post(url, body, ctype)
        assert status == 400 and "malformed request body" in text, (body, status, text)
    event = mention("ExternalError: Nccl error(2), unhandled system error")
    assert post_event(url, event)[0] == 200  # still answering
    stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)


def test_mounted_route_answers_malformed_bodies_with_400(stub, seeds_kb, monkeypatch):
    """`kb serve --slack` answered them with a 500."""
    fastapi = pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from kb.doors.slack.events import mount

    monkeypatch.setenv("SLACK_BOT_TOKEN", stub.token)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    web = fastapi.FastAPI()
    bot = mount(web, seeds_kb, client=slack_client(stub))
    with _serving(web, bot) as base:
        url = base + "/slack/events"
        for body, ctype in MALFORMED_BODIES:
            status, text, _ = signed_post(url, body, ctype)
            assert status == 400 and "malformed request body" in text, (body, status, text)


@pytest.fixture
def small_http_server(stub, seeds_kb):
    """A fresh HTTP-mode host with a 1 s timeout for a request's head and 2 s for its body (not yet serving)."""
    from helpers import slack_http

    from kb.doors.slack.bot import SlackBot

    bot = SlackBot(seeds_kb, signing_secret=SECRET, client=slack_client(stub))
    server = slack_http(bot, head_timeout_s=1.0, body_timeout_s=2.0)
    yield bot, server, f"http://127.0.0.1:{server.address[1]}/slack/events"
    server.stop()
    bot.close()


def test_http_mode_keeps_connections_bounded_and_times_out_silent_clients(small_http_server, stub):
    """The hand-written server held a thread per connection and had no read timeout: 100 silent
    connections held 100 threads forever. On the HTTP host silent connections cost no thread,
    each one that sends no complete request head is closed after the head timeout, and a real
    request behind them is answered."""
    bot, server, url = small_http_server
    server.start()
    before = threading.active_count()
    silent = [socket.create_connection(server.address, timeout=10) for _ in range(40)]
    silent[0].sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\n")  # half a request, then nothing
    time.sleep(0.5)
    assert threading.active_count() - before <= 4 + 1  # no thread per connection
    started = time.monotonic()
    status, body, _ = signed_post(
        url, json.dumps({"type": "url_verification", "challenge": "c-9"}), "application/json"
    )
    assert status == 200 and "c-9" in body
    assert time.monotonic() - started < 30
    silent[0].settimeout(10)
    assert silent[0].recv(100) == b""  # the half request was closed by the server, not left open
    for s in silent:
        s.close()


def test_a_body_that_trickles_in_is_cut_off_and_a_slow_answer_is_not(small_http_server):
    """Its head in time, then a byte of body every 0.4 s: it once held its connection (and a file
    descriptor) for as long as the client liked; 200 such clients starved the server."""
    _, server, url = small_http_server
    server.start()
    slow = socket.create_connection(server.address, timeout=10)
    slow.sendall(
        b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
    )
    started, closed = time.monotonic(), False
    while time.monotonic() - started < 8 and not closed:
        try:
            slow.sendall(b" ")
            time.sleep(0.4)
        except OSError:
            closed = True
    slow.settimeout(5)
    try:
        closed = closed or slow.recv(100) == b""
    except OSError:
        closed = True
    assert closed and time.monotonic() - started < 8
    slow.close()
    # A whole request is answered as before.
    status, body, _ = signed_post(
        url, json.dumps({"type": "url_verification", "challenge": "c-7"}), "application/json"
    )
    assert status == 200 and "c-7" in body


def test_http_mode_listen_backlog_takes_a_burst(small_http_server):
    """http.server's listen backlog is 5: in a burst of connections, the rest had their SYNs dropped
    and waited seconds to connect. Nothing is accepted here (the server is not serving yet)."""
    _, server, _ = small_http_server
    opened = []
    try:
        for _ in range(60):
            opened.append(socket.create_connection(server.address, timeout=0.5))
    except OSError as e:
        pytest.fail(f"connection {len(opened) + 1} of a burst of 60 was not taken: {e}")
    finally:
        for s in opened:
            s.close()
