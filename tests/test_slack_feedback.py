"""Feedback in Slack (kb/doors/slack/feedback.py) over real HTTP: the bot in HTTP mode on 127.0.0.1,
the Slack Web API stand-in, and `block_actions` / `view_submission` payloads signed as Slack
signs them. The votes land in the feedback store."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

import pytest
from helpers import NCCL_LINE, mention, post_event, signed_post
from slack_actions import feedback_click as click
from slack_actions import view_submission as submit

pytest.importorskip("slack_bolt")
pytestmark = pytest.mark.slow

BREAD = "How do I bake sourdough bread with rye flour?"


def ask_in_slack(bot, stub, text: str):
    """Mention the bot; (the answer's message, the feedback row id its buttons name)."""
    app, url = bot
    stub.reset()
    event = mention(text)
    assert post_event(url, event)[0] == 200
    stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    [post] = stub.of("chat.postMessage")
    block = post.params["blocks"][-1]
    assert block["type"] == "context_actions"
    [buttons] = block["elements"]
    assert buttons["type"] == "feedback_buttons" and buttons["action_id"] == "kb_feedback"
    assert (buttons["positive_button"]["value"], buttons["negative_button"]["value"]) == ("up", "down")
    return post, int(block["block_id"].removeprefix("kb_feedback:"))


def wait_for_vote(store, row_id: int, vote: str):
    deadline = time.monotonic() + 20
    while (row := store.get(row_id)).vote != vote:
        assert time.monotonic() < deadline, row
        time.sleep(0.05)
    return row


def test_thumbs_down_then_the_form_names_the_right_entry(bot, stub, seeds_kb):
    app, url = bot
    store = app.feedback.store
    post, row_id = ask_in_slack(bot, stub, NCCL_LINE)
    row = store.get(row_id)
    assert (row.door, row.query, row.vote, row.match) == ("slack", NCCL_LINE, None, "match")
    assert row.shown[0]["title"] == "NCCL error(2)" and row.generation == seeds_kb.stats()["generation"]
    assert not row.in_queue  # answered and not voted on: not in the unanswered queue

    status, _, took = click(url, post, row_id, "down", trigger_id="777.888.999")
    assert status == 200 and took < 3.0
    row = wait_for_vote(store, row_id, "down")
    assert row.in_queue
    [opened] = stub.wait_for("views.open")
    assert opened.params["trigger_id"] == "777.888.999"
    view = opened.params["view"]
    assert view["callback_id"] == "kb_feedback_detail" and view["private_metadata"] == str(row_id)
    options = view["blocks"][0]["element"]["options"]
    assert [o["value"] for o in options] == [e["entry_id"] for e in row.shown]
    assert all(len(o["text"]["text"]) <= 75 for o in options)

    # A name that matches nothing keeps the form open with the reason under the field.
    status, body, _ = submit(
        url, view, {"named": {"text": {"type": "plain_text_input", "value": "no such entry"}}}
    )
    assert status == 200 and json.loads(body)["response_action"] == "errors"
    assert "no entry 'no such entry'" in json.loads(body)["errors"]["named"]
    assert store.get(row_id).right is None

    nccl5 = next(e for e in seeds_kb.index.entries if e.title == "NCCL error(5)")
    values = {
        "right": {"entry": {"type": "static_select", "selected_option": {"value": nccl5.id}}},
        "comment": {"text": {"type": "plain_text_input", "value": "my log says error(5)"}},
    }
    status, body, _ = submit(url, view, values)
    assert status == 200 and body == ""
    row = store.get(row_id)
    assert (row.vote, row.comment, row.right["entry_id"], row.right["title"]) == (
        "down", "my log says error(5)", nccl5.id, "NCCL error(5)",
    )  # fmt: skip


def test_thumbs_up_is_stored_and_opens_no_form(bot, stub):
    app, url = bot
    post, row_id = ask_in_slack(bot, stub, "Init plugin so failed, ret = 1343225860")
    assert click(url, post, row_id, "up")[0] == 200
    row = wait_for_vote(app.feedback.store, row_id, "up")
    assert not row.in_queue
    assert app.wait_idle(10) and stub.of("views.open") == []


def test_no_match_is_queued_and_its_thumbs_down_is_the_same_row(bot, stub):
    app, url = bot
    store = app.feedback.store
    post, row_id = ask_in_slack(bot, stub, BREAD)
    row = store.get(row_id)
    assert row.match == "none" and row.in_queue  # in the queue before anyone votes
    assert click(url, post, row_id, "down")[0] == 200
    wait_for_vote(store, row_id, "down")
    stub.wait_for("views.open")  # the form, with the nearest entries to pick from
    assert app.wait_idle(10)
    assert [r.id for r in store.rows() if r.query == BREAD] == [row_id]  # counted once


def test_a_click_for_no_stored_answer_changes_nothing(bot, stub):
    app, url = bot
    post, row_id = ask_in_slack(bot, stub, NCCL_LINE)
    before = app.feedback.store.rows()
    assert click(url, post, 10**9, "down")[0] == 200
    assert app.wait_idle(10)
    assert app.feedback.store.rows() == before and stub.of("views.open") == []
    payload = urlencode({"payload": json.dumps({"type": "block_actions", "actions": []})})
    assert signed_post(url, payload, "application/x-www-form-urlencoded", secret="wrong")[0] == 401


def test_a_word_back_to_thanks_has_no_buttons_and_stores_nothing(bot, stub):
    app, url = bot
    before = app.feedback.store.rows()
    stub.reset()
    assert post_event(url, mention("thanks, that fixed it!"))[0] == 200
    [post] = stub.wait_for("chat.postMessage")
    assert app.wait_idle(30)
    assert all(b["type"] != "context_actions" for b in post.params["blocks"])
    assert app.feedback.store.rows() == before
