"""The Slack door over real HTTP: a local Slack Web API stand-in (tests/slack_stub.py), the bolt app
in HTTP mode on 127.0.0.1, and correctly signed Events API / slash-command requests. No Slack access."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from html import unescape
from pathlib import Path
from urllib.parse import urlencode

import pytest
from helpers import SECRET, mention, new_ts, post_event, reply_text, signed_post
from slack_stub import BOT_ID, BOT_USER, TEAM, SlackStub

from kb.answer import LABELS, Answer, Citation
from kb.present import CAUTION

pytest.importorskip("slack_bolt")

ROOT = Path(__file__).resolve().parents[1]
NCCL_LOG = """\
I0611 10:02:11.123 launch.py:312] LAUNCH INFO job started, 8 ranks
W0611 10:02:15.553 trainer.py:88] step 0 loss 10.4
Traceback (most recent call last):
  File "train.py", line 41, in <module>
    dist.all_reduce(t)
ExternalError: Nccl error(2), unhandled system error
"""


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stub():
    s = SlackStub().start()
    yield s
    s.stop()


def _client(stub: SlackStub, token: str | None = None):
    from slack_sdk import WebClient

    return WebClient(token=token or stub.token, base_url=stub.api_url)


@pytest.fixture(scope="module")
def bot_url(stub, seeds_kb):
    """The bot in HTTP mode on 127.0.0.1, talking to the stand-in."""
    from helpers import slack_http

    from kb.doors.slack.bot import SlackBot

    bot = SlackBot(seeds_kb, signing_secret=SECRET, client=_client(stub))
    server = slack_http(bot).start()
    yield bot, f"http://127.0.0.1:{server.address[1]}/slack/events"
    server.stop()
    bot.close()


@pytest.fixture
def bot(bot_url, stub):
    stub.reset()
    return bot_url


def nccl_entry(kb):
    return next(e for e in kb.index.entries if e.title == "NCCL error(2)")


# -- requests as Slack sends them ------------------------------------------------------------


# -- the conversation ------------------------------------------------------------------------


def test_mention_with_log_file_gets_one_threaded_answer(bot, stub, seeds_kb):
    app, url = bot
    log_file = stub.add_file("train.log", NCCL_LOG)
    event = mention("my job died, log attached", files=[{"id": log_file.id}])
    status, _, took = post_event(url, event)
    assert status == 200
    assert took < 3.0  # acknowledged well within Slack's 3 seconds; the answer comes later
    posts = stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    posts = stub.of("chat.postMessage")
    assert len(posts) == 1
    post = posts[0].params
    assert post["channel"] == "CGENERAL" and post["thread_ts"] == event["ts"]
    text = reply_text(posts[0])
    entry = nccl_entry(seeds_kb)
    assert "NCCL error(2)" in text and "--shm-size 32G" in text
    assert f"[1] NCCL error(2) (`{entry.doc}:{entry.start_line}-{entry.end_line}`)" in text
    # the log was read the way Slack requires: files.info, then url_private with the bot token
    assert [c.params["file"] for c in stub.of("files.info")] == [log_file.id]
    assert [d.token for d in stub.downloads] == [stub.token]
    # "searching" shown on the question first, removed after the answer
    added = stub.of("reactions.add")
    assert [(c.params["name"], c.params["timestamp"]) for c in added] == [("mag", event["ts"])]
    assert stub.of("reactions.remove")[0].at >= posts[0].at


def test_answer_carries_the_command_citations_and_other_language(bot, stub, seeds_kb):
    app, url = bot
    event = mention("What should I do if the error message Init plugin so failed, ret = 1343225860 appears?")
    assert post_event(url, event)[0] == 200
    stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    [post] = stub.of("chat.postMessage")
    blocks = post.params["blocks"]
    codes = [b["text"]["text"] for b in blocks if b.get("text", {}).get("text", "").startswith("```")]
    assert codes == ["```export ASCEND_SLOG_PRINT_TO_STDOUT=1```"]  # the entry's command, its own code block
    text = reply_text(post)
    best = next(e for e in seeds_kb.index.entries if e.lang == "en" and "Init plugin so failed" in e.title)
    zh = seeds_kb.entry(best.translation)
    assert f"[1] {best.title} (`{best.doc}:{best.start_line}-{best.end_line}`)" in text
    assert re.search(r"\[2\] .+ \(`\S+:\d+-\d+`\)", text)
    assert f"{LABELS['en']['other_lang']}: {zh.title} (`{zh.doc}:{zh.start_line}-{zh.end_line}`)" in text
    assert CAUTION["en"] not in text  # `export ...` is not destructive


def test_slack_retry_of_the_same_event_is_not_answered_twice(bot, stub):
    app, url = bot
    event = mention("ExternalError: Nccl error(2), unhandled system error")
    event_id = "EvRETRY" + uuid.uuid4().hex[:6]
    assert post_event(url, event, event_id=event_id)[0] == 200
    stub.wait_for("chat.postMessage")
    for n in (1, 2):
        status, _, _ = post_event(
            url,
            event,
            event_id=event_id,
            headers={"X-Slack-Retry-Num": str(n), "X-Slack-Retry-Reason": "http_timeout"},
        )
        assert status == 200
    assert app.wait_idle(30)
    assert len(stub.of("chat.postMessage")) == 1
    assert len(stub.of("reactions.add")) == 1


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


def test_thread_follow_up_uses_the_earlier_messages(bot, stub, seeds_kb):
    app, url = bot
    follow_up = "what if it happens inside docker?"
    # Alone, the follow-up does not find the HCCL entry: only the thread's context can.
    alone = seeds_kb.ask(follow_up)
    assert alone.no_match or "1343225860" not in alone.citations[0].entry.title
    root = new_ts()
    question = f"<@{BOT_USER}> Init plugin so failed, ret = 1343225860"
    earlier_answer = "(the bot's earlier answer)"
    stub.add_thread_message("CGENERAL", root, {"user": "UALICE", "ts": root, "text": question})
    stub.add_thread_message(
        "CGENERAL", root, {"bot_id": BOT_ID, "ts": f"{float(root) + 1:.6f}", "text": earlier_answer}
    )
    event = mention(follow_up, thread_ts=root)
    assert post_event(url, event)[0] == 200
    stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    [replies] = stub.of("conversations.replies")
    assert replies.params["channel"] == "CGENERAL" and replies.params["ts"] == root
    [post] = stub.of("chat.postMessage")
    assert post.params["thread_ts"] == root
    assert "Init plugin so failed" in reply_text(post)  # the entry the thread's question names


def test_rate_limited_post_is_retried_after_retry_after(bot, stub):
    app, url = bot
    stub.rate_limit("chat.postMessage", retry_after=1)
    assert post_event(url, mention("ExternalError: Nccl error(2), unhandled system error"))[0] == 200
    [ok] = stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    [limited] = stub.of("chat.postMessage", status=429)
    waited = ok.at - limited.at
    print(f"429 -> retry after {waited:.2f}s (Retry-After: 1)")
    assert 1.0 <= waited < 5.0
    assert len(stub.of("chat.postMessage")) == 1


def test_refused_blocks_fall_back_to_plain_text(bot, stub):
    app, url = bot
    stub.fail("chat.postMessage", "invalid_blocks")
    event = mention("ExternalError: Nccl error(2), unhandled system error")
    assert post_event(url, event)[0] == 200
    stub.wait_for("chat.postMessage", 2)
    assert app.wait_idle(30)
    refused, plain = stub.of("chat.postMessage")
    assert refused.response["error"] == "invalid_blocks" and "blocks" in refused.params
    assert "blocks" not in plain.params and plain.params["thread_ts"] == event["ts"]
    assert plain.params["text"].startswith("NCCL error(2)")


def test_direct_message_is_answered_and_bot_messages_are_ignored(bot, stub):
    app, url = bot
    base = {"type": "message", "channel": "DALICE", "channel_type": "im"}
    ignored = [
        # ourselves
        {**base, "user": BOT_USER, "bot_id": BOT_ID, "text": "NCCL error(2) answer", "ts": new_ts()},
        # a legacy bot (subtype bot_message, no user)
        {**base, "bot_id": "BOTHER", "subtype": "bot_message", "text": "Nccl error(2)", "ts": new_ts()},
        # another app's bot user: a user id, but bot_id set too
        {**base, "user": "UOTHERBOT", "bot_id": "BOTHER", "text": "Nccl error(2)", "ts": new_ts()},
        # an edit of a user's message
        {**base, "user": "UALICE", "subtype": "message_changed", "text": "Nccl error(2)", "ts": new_ts()},
    ]
    for event in ignored:
        assert post_event(url, event)[0] == 200
    assert app.wait_idle(30)
    assert stub.of("chat.postMessage") == [] and stub.of("reactions.add") == []
    dm = {
        **base,
        "user": "UALICE",
        "text": "ExternalError: Nccl error(2), unhandled system error",
        "ts": new_ts(),
        "client_msg_id": str(uuid.uuid4()),
    }
    assert post_event(url, dm)[0] == 200
    [post] = stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    assert post.params["channel"] == "DALICE" and post.params["thread_ts"] == dm["ts"]
    assert "NCCL error(2)" in reply_text(post)


def test_slash_command_acks_fast_then_updates_the_searching_message(bot, stub):
    app, url = bot
    form = {
        "command": "/kb",
        "text": "ExternalError: Nccl error(2), unhandled system error",
        "channel_id": "CGENERAL",
        "user_id": "UALICE",
        "team_id": TEAM,
        "response_url": stub.url + "/respond",
        "trigger_id": "1.2.3",
    }
    status, _, took = signed_post(url, urlencode(form), "application/x-www-form-urlencoded")
    assert status == 200 and took < 3.0
    [update] = stub.wait_for("chat.update")
    assert app.wait_idle(30)
    question, searching = stub.of("chat.postMessage")
    assert question.params["metadata"]["event_payload"]["text"] == form["text"]
    assert searching.params["thread_ts"] and "searching" in searching.params["text"]
    assert update.params["ts"] == searching.response["ts"]  # the "searching..." message became the answer
    assert "NCCL error(2)" in reply_text(update)


def test_wrong_bot_token_is_a_clear_error(stub, seeds_kb):
    from kb.doors.slack.bot import SlackBot
    from kb.errors import KbError

    with pytest.raises(KbError, match="SLACK_BOT_TOKEN.*invalid_auth"):
        SlackBot(seeds_kb, signing_secret=SECRET, client=_client(stub, token="xoxb-wrong"))


def test_mount_serves_http_mode_inside_a_fastapi_app(stub, seeds_kb, monkeypatch):
    fastapi = pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    from kb.doors.slack.events import mount
    from kb.errors import KbError

    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", stub.token)
    with pytest.raises(KbError, match="SLACK_SIGNING_SECRET"):
        mount(fastapi.FastAPI(), seeds_kb, client=_client(stub))
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    web = fastapi.FastAPI()
    bot = mount(web, seeds_kb, client=_client(stub))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(web, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/slack/events"
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
    finally:
        server.should_exit = True
        thread.join(10)
        bot.close()


# -- tokens and the command line -------------------------------------------------------------


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
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    try:
        deadline = time.monotonic() + 90
        while not any("listening on" in ln for ln in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        url = re.search(r"listening on (\S+)", "".join(lines)).group(1)
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
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {"app_mention", "message.im"}
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/kb"]


# -- Block Kit -------------------------------------------------------------------------------


def _entry(n: int, doc: str = "nccl/en/faq.md", lang: str = "en", translation: str | None = None):
    from ingest.entry import Entry

    fields = dict(
        id=f"e{n}", content_hash="h", doc=doc, lang=lang, title=f"Entry <{n}> & co", heading_path=(),
        body="b", start_line=10 * n, end_line=10 * n + 5, signatures=(), commands=(), translation=translation,
    )  # fmt: skip
    return Entry(**fields)


def _all_text(messages) -> str:
    return "\n".join(reply_text(type("C", (), {"params": m})) for m in messages)


def test_blocks_respect_slack_limits_and_label_destructive_commands():
    from kb.doors.slack.blocks import MAX_BLOCKS, MAX_SECTION_CHARS, answer_messages

    commands = tuple(f"export NCCL_VAR_{i}=1" for i in range(60)) + ("rm -rf /tmp/nccl-*", "x" * 7000)
    long_text = "\n\n".join(f"Paragraph {i}: " + "shm too small; " * 40 for i in range(40))
    answer = Answer(
        query="q",
        lang="en",
        text=long_text + "\n\n```\n" + "log line\n" * 600 + "```",
        commands=commands,
        citations=(Citation(1, _entry(1, translation="z1")),),
        no_match=False,
    )
    messages = answer_messages(
        answer, "https://docs.example.org/kb/", lookup={"z1": _entry(9, "nccl/zh/faq.md", "zh")}.get
    )
    assert len(messages) > 1
    for m in messages:
        assert 0 < len(m["blocks"]) <= MAX_BLOCKS and m["text"]
        for b in m["blocks"]:
            text = b["text"]["text"] if "text" in b else b["elements"][0]["text"]
            assert len(text) <= MAX_SECTION_CHARS
            assert text.count("```") % 2 == 0  # every code fence closed within its block
    blocks = [b for m in messages for b in m["blocks"]]
    codes = [b["text"]["text"] for b in blocks if b.get("text", {}).get("text", "").startswith("```")
             and "log line" not in b["text"]["text"]]  # fmt: skip
    # every command verbatim, in order, each in its own code block (the 7000-char one in pieces)
    assert "".join(unescape(c[3:-3]) for c in codes) == "".join(commands)
    labels = [
        i
        for i, b in enumerate(blocks)
        if b["type"] == "context" and CAUTION["en"] in b["elements"][0]["text"]
    ]
    assert len(labels) == 1  # only the destructive command is labelled, right above its code block
    assert unescape(blocks[labels[0] + 1]["text"]["text"]) == "```rm -rf /tmp/nccl-*```"
    text = _all_text(messages)
    assert "[1] <https://docs.example.org/kb/nccl/en/faq.md#L10-L15|Entry <1> & co>" in text
    assert f"{LABELS['en']['other_lang']}: <https://docs.example.org/kb/nccl/zh/faq.md#L90-L95|" in text
    assert "&lt;1&gt; &amp; co" in json.dumps(messages)  # Slack's control characters escaped


def test_no_match_is_a_plain_statement_with_suggestions():
    from index.search import Hit
    from kb.doors.slack.blocks import answer_messages

    hit = Hit(
        entry=_entry(2), score=0.1, dense_rank=1, lexical_rank=None, dense_score=0.3, matched_signature=None
    )
    answer = Answer(
        query="q",
        lang="zh",
        text=LABELS["zh"]["no_match"],
        commands=(),
        citations=(),
        no_match=True,
        suggestions=(hit,),
    )
    [message] = answer_messages(answer)
    text = _all_text([message])
    assert text.startswith(LABELS["zh"]["no_match"])
    assert LABELS["zh"]["suggest"] in text and "• Entry <2> & co (`nccl/en/faq.md:20-25`)" in text
    assert LABELS["zh"]["sources"] not in text and "```" not in text


def test_slack_markup_becomes_the_typed_text():
    from kb.doors.slack.plumbing import slack_to_plain

    typed = slack_to_plain(
        f"<@{BOT_USER}> see <#C1|general> &lt;hostname&gt; &amp;&amp; <https://x.org/a|the doc> ```NCCL WARN```"
    )
    assert typed == "see #general <hostname> && the doc \nNCCL WARN"


def test_split_text_closes_and_reopens_code_fences():
    from kb.doors.slack.blocks import split_text

    text = "intro\n```\n" + "\n".join(f"line {i}" for i in range(1000)) + "\n```\nafter"
    pieces = split_text(text, 500)
    assert all(len(p) <= 500 and p.count("```") % 2 == 0 for p in pieces)
    assert len(pieces) > 10 and pieces[1].startswith("```\n") and pieces[0].endswith("\n```")
    # undoing the fences added at each cut gives back the text, nothing lost or doubled
    assert "\n".join(pieces).replace("\n```\n```\n", "\n") == text


def test_cli_help_does_not_import_slack():
    code = "import sys, kb.doors.cli; kb.doors.cli.build_parser(); print(any(m.startswith('slack') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "False"


# -- replays, malformed bodies and connections (issue 17, item 11) ---------------------------


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
    uvicorn = pytest.importorskip("uvicorn")
    from kb.doors.slack.events import mount

    monkeypatch.setenv("SLACK_BOT_TOKEN", stub.token)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    web = fastapi.FastAPI()
    bot = mount(web, seeds_kb, client=_client(stub))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(web, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/slack/events"
        for body, ctype in MALFORMED_BODIES:
            status, text, _ = signed_post(url, body, ctype)
            assert status == 400 and "malformed request body" in text, (body, status, text)
    finally:
        server.should_exit = True
        thread.join(10)
        bot.close()


@pytest.fixture
def small_http_server(stub, seeds_kb):
    """A fresh HTTP-mode host with a 1 s timeout for a request's head (not yet serving)."""
    from helpers import slack_http

    from kb.doors.slack.bot import SlackBot

    bot = SlackBot(seeds_kb, signing_secret=SECRET, client=_client(stub))
    server = slack_http(bot, head_timeout_s=1.0)
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
