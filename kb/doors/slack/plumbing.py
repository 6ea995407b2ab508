"""What the Slack bot stands on: its tokens, remembering what it has seen (Slack redelivers
events and can send one message twice), the listener pool it can wait for, and Slack's markup
read back as the text the user typed. slack_bolt / slack_sdk are not imported here.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from html import unescape

from ...errors import KbError


@dataclass(frozen=True)
class Tokens:
    bot: str
    app: str = ""  # Socket Mode only
    signing_secret: str = ""  # HTTP mode only


def read_tokens(mode: str) -> Tokens:
    """Tokens from the environment only (never from kb.toml), with an error naming what is missing."""
    need = (
        ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")
        if mode == "socket"
        else ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET")
    )
    missing = [name for name in need if not os.environ.get(name, "").strip()]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise KbError(
            f"{' and '.join(missing)} {verb} not set; {mode} mode needs {' and '.join(need)} in the environment "
            "(create the app from slack/manifest.yml; the README's Slack section says where each value is)"
        )
    env = {name: os.environ[name].strip() for name in need}
    if mode == "socket" and not env["SLACK_APP_TOKEN"].startswith("xapp-"):
        raise KbError(
            "SLACK_APP_TOKEN must be an app-level token (xapp-...) with the connections:write scope "
            "(Basic Information > App-Level Tokens)"
        )
    return Tokens(
        bot=env["SLACK_BOT_TOKEN"],
        app=env.get("SLACK_APP_TOKEN", ""),
        signing_secret=env.get("SLACK_SIGNING_SECRET", ""),
    )


class Seen:
    """Keys seen in the last `ttl` seconds: Slack redelivers an event (X-Slack-Retry-Num) when our
    acknowledgement was late or lost, and may send a message as both app_mention and message.im."""

    def __init__(self, ttl: float = 3600.0, cap: int = 20000) -> None:
        self.ttl, self.cap = ttl, cap
        self._keys: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, *keys: str) -> bool:
        keys = tuple(k for k in keys if k)
        now = time.monotonic()
        with self._lock:
            while self._keys and (
                len(self._keys) > self.cap or next(iter(self._keys.values())) < now - self.ttl
            ):
                self._keys.popitem(last=False)
            if any(k in self._keys for k in keys):
                return False
            for k in keys:
                self._keys[k] = now
            return True


class TrackingExecutor(ThreadPoolExecutor):
    """bolt's listener executor, counting work in flight so shutdown (and tests) can wait for it."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="kb-slack")
        self._pending: set = set()
        self._pending_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        future = super().submit(fn, *args, **kwargs)
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            with self._pending_lock:
                pending = list(self._pending)
            left = deadline - time.monotonic()
            if not pending:
                return True
            if left <= 0:
                return False
            wait(pending, timeout=left)


_MENTION = re.compile(r"<([@#!])([^>|]*)(?:\|([^>]*))?>")
_LINK = re.compile(r"<((?:https?|mailto):[^>|]+)(?:\|([^>]*))?>")


def slack_to_plain(text: str) -> str:
    """Slack message markup -> the text the user typed: mentions dropped, links unwrapped,
    &amp;/&lt;/&gt; decoded (a log line like `<hostname>` arrives as `&lt;hostname&gt;`)."""
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    # <@U123> and <!here> are dropped; <#C123|general> keeps the channel name.
    text = _MENTION.sub(lambda m: "#" + m.group(3) if m.group(1) == "#" and m.group(3) else "", text)
    text = text.replace("```", "\n")
    return unescape(text).strip()


def bolt_logger() -> logging.Logger:
    """bolt's log, minus a warning it gives whenever SLACK_BOT_TOKEN is set and a client is passed
    (we pass the client to get the 429 and 5xx retry handlers; the token is the same one)."""
    logger = logging.getLogger("kb.slack.bolt")
    if not logger.filters:
        logger.addFilter(lambda record: "`token` will be unused" not in record.getMessage())
    return logger
