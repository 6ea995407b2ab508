"""The Slack door over real HTTP: a local Slack Web API stand-in (tests/slack_stub.py), the bolt app
in HTTP mode on 127.0.0.1, and correctly signed Events API / slash-command requests. No Slack access."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest
from helpers import SECRET, mention, nccl_entry, new_ts, post_event, reply_text, signed_post, slack_client
from slack_stub import BOT_ID, BOT_USER, TEAM

from kb.answer import LABELS
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
    # Further sources only when they are related (kb/answer.py related_hits): no padding to three.
    assert not re.search(r"\[3\] .+ \(`\S+:\d+-\d+`\)", text)
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


def test_messages_without_a_client_msg_id_are_each_answered(bot, stub):
    """Some clients and integrations send none: each such message is still a message of its own
    (all of them after the first were dropped for an hour)."""
    app, url = bot
    for text in (
        "ExternalError: Nccl error(2), unhandled system error",
        "Init plugin so failed, ret = 1343225860",
    ):
        event = mention(text)
        del event["client_msg_id"]
        assert post_event(url, event)[0] == 200
        assert app.wait_idle(30)
    first, second = stub.of("chat.postMessage")
    assert "NCCL error(2)" in reply_text(first) and "1343225860" in reply_text(second)


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

    # A question holding ``` cannot close the block it is quoted in (and format the rest).
    stub.reset()
    form = {**form, "text": "why does ```rm -rf x``` show *bold* here"}
    assert signed_post(url, urlencode(form), "application/x-www-form-urlencoded")[0] == 200
    stub.wait_for("chat.update")
    assert app.wait_idle(30)
    quoted = stub.of("chat.postMessage")[0].params["blocks"][0]["text"]["text"]
    assert quoted.count("```") == 2 and quoted.endswith("```")


def test_wrong_bot_token_is_a_clear_error(stub, seeds_kb):
    from kb.doors.slack.bot import SlackBot
    from kb.errors import KbError

    with pytest.raises(KbError, match="SLACK_BOT_TOKEN.*invalid_auth"):
        SlackBot(seeds_kb, signing_secret=SECRET, client=slack_client(stub, token="xoxb-wrong"))


# -- tokens and the command line -------------------------------------------------------------


# -- Block Kit -------------------------------------------------------------------------------


# -- replays, malformed bodies and connections (issue 17, item 11) ---------------------------


def test_an_empty_mention_gets_the_help_in_both_languages(bot, stub):
    app, url = bot
    assert post_event(url, mention("   "))[0] == 200
    [post] = stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    text = reply_text(post)
    assert "Paste an error message" in text and "贴上报错信息" in text


def test_a_log_over_the_limit_is_read_whole_and_the_answer_says_what_was_searched(bot, stub, seeds_kb):
    # The error is near the top, under 3 MB of healthy steps: reading only the file's tail lost it.
    head = "python -m paddle.distributed.launch --gpus 0,1 train.py\nExternalError: Nccl error(2), unhandled system error\n"
    steps = "".join(
        f"[INFO] step {i} loss 0.{i % 97:02d} lr 1e-4 throughput 812 samples/s\n" for i in range(50_000)
    )
    log_file = stub.add_file("train.log", head + steps)
    app, url = bot
    assert post_event(url, mention("job died, full log attached", files=[{"id": log_file.id}]))[0] == 200
    [post] = stub.wait_for("chat.postMessage")
    assert app.wait_idle(60)
    text = reply_text(post)
    assert "NCCL error(2)" in text and "--shm-size 32G" in text
    assert "The log is 2.9 MB (50004 lines), over the search limit: searched" in text
