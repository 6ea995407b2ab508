"""Slack follow-ups without a fresh mention (kb/doors/slack/followups.py): the bot in HTTP mode on
127.0.0.1, the Web API stand-in, `message.channels` / `message.groups` events signed as Slack
signs them. Only the asker's replies in threads the bot answered are answered, once."""

from __future__ import annotations

import uuid

import pytest
from helpers import HCCL_LINE, mention, new_ts, post_event, reply_text
from slack_stub import BOT_USER

from kb.doors.slack.followups import ChannelPolicy, Followups

pytest.importorskip("slack_bolt")

FOLLOW_UP = "what if it happens inside docker?"


def thread_reply(
    text: str, thread_ts: str, user: str = "UALICE", channel: str = "CGENERAL", kind: str = "channel"
):
    """A `message` event as Slack sends it for a reply in a channel thread."""
    ts = new_ts()
    return {
        "type": "message",
        "channel_type": kind,
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "thread_ts": thread_ts,
        "client_msg_id": str(uuid.uuid4()),
    }


def answered_thread(bot, stub, channel: str) -> str:
    """Alice mentions the bot at the top of `channel`; the thread it answers in."""
    app, url = bot
    question = mention(HCCL_LINE, channel=channel)
    stub.add_thread_message(
        channel, question["ts"], {"user": "UALICE", "ts": question["ts"], "text": question["text"]}
    )
    assert post_event(url, question)[0] == 200
    stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    stub.reset()
    return question["ts"]


def posts_after(bot, stub, *events) -> list:
    app, url = bot
    for event, event_id in events:
        assert post_event(url, event, event_id=event_id)[0] == 200
    assert app.wait_idle(30)
    return stub.of("chat.postMessage")


@pytest.mark.slow
@pytest.mark.parametrize(("channel", "kind"), [("CGENERAL", "channel"), ("GPRIVATE", "group")])
def test_the_askers_reply_in_an_answered_thread_needs_no_mention(bot, stub, channel, kind, seeds_kb):
    root = answered_thread(bot, stub, channel)
    # Alone, the follow-up finds nothing: only the thread's earlier messages make it answerable.
    assert (
        seeds_kb.ask(FOLLOW_UP).no_match
        or "1343225860" not in seeds_kb.ask(FOLLOW_UP).citations[0].entry.title
    )
    reply = thread_reply(FOLLOW_UP, root, channel=channel, kind=kind)
    event_id = "Ev" + uuid.uuid4().hex[:10]
    # Slack may deliver it twice (a retry): answered once.
    [post] = posts_after(bot, stub, (reply, event_id), (reply, event_id))
    assert post.params["channel"] == channel and post.params["thread_ts"] == root
    assert "1343225860" in reply_text(post)


@pytest.mark.slow
def test_a_reply_that_mentions_the_bot_is_answered_once(bot, stub):
    root = answered_thread(bot, stub, "CGENERAL")
    text = f"<@{BOT_USER}> {FOLLOW_UP}"
    as_message = thread_reply(text, root)
    as_mention = {**as_message, "type": "app_mention"}
    as_mention.pop("channel_type")
    posts = posts_after(bot, stub, (as_message, None), (as_mention, None))
    assert len(posts) == 1 and posts[0].params["thread_ts"] == root


@pytest.mark.slow
def test_replies_the_bot_was_not_asked_are_ignored(bot, stub):
    root = answered_thread(bot, stub, "CGENERAL")
    never_joined = new_ts()  # a thread between people the bot never answered in
    stub.add_thread_message("CGENERAL", never_joined, {"user": "UBOB", "ts": never_joined, "text": HCCL_LINE})
    top_level = {**thread_reply(HCCL_LINE, root), "thread_ts": None}
    ignored = [
        (thread_reply(HCCL_LINE, never_joined), None),  # a thread the bot never joined
        (thread_reply(FOLLOW_UP, root, user="UBOB"), None),  # someone else in the answered thread
        (thread_reply(FOLLOW_UP, root, channel="COTHER"), None),  # the same ts, another channel
        (top_level, None),  # a channel message that is no thread reply
        ({**thread_reply(FOLLOW_UP, root), "subtype": "message_changed"}, None),  # an edit
    ]
    assert posts_after(bot, stub, *ignored) == []
    assert stub.of("conversations.replies") == [] and stub.of("reactions.add") == []


def test_channel_policy():
    assert ChannelPolicy("*").allows("C1") and not ChannelPolicy("off").allows("C1")
    assert not ChannelPolicy("").allows("C1")
    only = ChannelPolicy("C1, G2")
    assert only.allows("C1") and only.allows("G2") and not only.allows("C3")
    but = ChannelPolicy("*,-C3")
    assert but.allows("C1") and not but.allows("C3")


def test_followups_follow_the_setting_and_the_asker():
    event = thread_reply(FOLLOW_UP, "100.000001", channel="C1")
    on, off = Followups("*"), Followups("C9")
    for f in (on, off):
        assert not f.wants(event, BOT_USER)  # not answered there yet
        f.answered("C1", "100.000001", "UALICE")
    assert on.wants(event, BOT_USER) and not off.wants(event, BOT_USER)
    assert not on.wants({**event, "user": "UBOB"}, BOT_USER)
    assert not on.wants({**event, "channel_type": "im"}, BOT_USER)  # DMs are answered anyway
    expired = Followups("*", ttl_s=0.0)
    expired.answered("C1", "100.000001", "UALICE")
    assert not expired.wants(event, BOT_USER)
