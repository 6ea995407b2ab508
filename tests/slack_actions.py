"""Slack's interactive requests (`block_actions`, `view_submission`) as Slack signs and sends
them, for the feedback tests."""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid

from helpers import signed_post
from slack_stub import BOT_ID, BOT_USER, TEAM


def _from_alice(kind: str, trigger_id: str) -> dict:
    """The fields every interaction payload from our test user carries."""
    return {
        "type": kind,
        "team": {"id": TEAM, "domain": "test"},
        "user": {"id": "UALICE", "username": "alice", "team_id": TEAM},
        "api_app_id": "AKB",
        "token": "legacy",
        "trigger_id": trigger_id,
    }


def feedback_click(url: str, post, row_id: int, value: str, trigger_id: str | None = None):
    """The `block_actions` request Slack sends when a feedback button is clicked."""
    payload = {
        **_from_alice("block_actions", trigger_id or f"{time.time():.0f}.{uuid.uuid4().int % 10**6}.abc"),
        "container": {"type": "message", "message_ts": post.response["ts"], "channel_id": "CGENERAL"},
        "channel": {"id": "CGENERAL", "name": "general"},
        "message": {"type": "message", "bot_id": BOT_ID, "user": BOT_USER, "ts": post.response["ts"]},
        "response_url": "https://hooks.slack.invalid/actions/1",
        "actions": [
            {
                "type": "feedback_buttons",
                "action_id": "kb_feedback",
                "block_id": f"kb_feedback:{row_id}",
                "value": value,
                "text": {"type": "plain_text", "text": "👎" if value == "down" else "👍"},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return signed_post(
        url, urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
    )


def view_submission(url: str, view: dict, values: dict):
    """The `view_submission` request Slack sends when the modal is sent."""
    payload = {
        **_from_alice("view_submission", "1.2.3"),
        "view": {
            **view,
            "id": "V1",
            "team_id": TEAM,
            "app_id": "AKB",
            "bot_id": BOT_ID,
            "state": {"values": values},
        },
        "response_urls": [],
    }
    return signed_post(
        url, urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
    )
