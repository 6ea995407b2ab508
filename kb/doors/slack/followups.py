"""Follow-ups without a fresh mention: in a channel thread where the bot answered, a reply from
the person who asked is answered too (Slack's `message.channels` / `message.groups` events,
which reach the bot for every message in the channels it was invited to).

Only threads the bot answered in count, and only their askers: everyone else in the channel,
and every other thread, is left alone, and a reply that mentions the bot is the mention's to
answer (Slack sends it as both events). Which channels allow it is the `slack_followups`
setting: `*` (every channel, the default), `off`, or channel IDs (`C123,G456`; `*,-C789` for
all but some). The threads are remembered in this process for THREAD_TTL_S: after a restart,
an older thread needs a mention again (asking Slack about every thread reply in every channel
would cost an API call per message).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

THREAD_TTL_S = 7 * 86400
MAX_THREADS = 20_000
CHANNEL_TYPES = ("channel", "group")  # public and private channels; DMs are always answered


class ChannelPolicy:
    """Which channels the setting lets follow-ups happen in."""

    def __init__(self, setting: str) -> None:
        items = [s.strip() for s in setting.split(",") if s.strip()]
        self.every = "*" in items
        self.only = {s for s in items if s not in ("*", "off", "none") and not s.startswith("-")}
        self.never = {s[1:] for s in items if s.startswith("-")}

    def allows(self, channel: str) -> bool:
        if channel in self.never:
            return False
        return self.every or channel in self.only


class Followups:
    """The threads the bot answered in, with who asked there."""

    def __init__(self, setting: str = "*", ttl_s: float = THREAD_TTL_S) -> None:
        self.policy = ChannelPolicy(setting)
        self.ttl_s = ttl_s
        self._threads: OrderedDict[tuple[str, str], tuple[float, set[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def answered(self, channel: str, thread_ts: str, asker: str) -> None:
        now = time.monotonic()
        with self._lock:
            _, askers = self._threads.pop((channel, thread_ts), (now, set()))
            self._threads[(channel, thread_ts)] = (now, askers | {asker})
            while self._threads and (
                len(self._threads) > MAX_THREADS or next(iter(self._threads.values()))[0] < now - self.ttl_s
            ):
                self._threads.popitem(last=False)

    def wants(self, event: dict, bot_user: str) -> bool:
        """Whether `event` (a channel message) is a follow-up the bot should answer."""
        channel, thread_ts = event.get("channel", ""), event.get("thread_ts")
        if event.get("channel_type") not in CHANNEL_TYPES or not thread_ts or thread_ts == event.get("ts"):
            return False  # not a reply in a thread
        if bot_user and f"<@{bot_user}>" in (event.get("text") or ""):
            return False  # a mention: answered as app_mention
        if not self.policy.allows(channel):
            return False
        with self._lock:
            seen = self._threads.get((channel, thread_ts))
        if seen is None or seen[0] < time.monotonic() - self.ttl_s:
            return False  # a thread the bot never answered in
        return event.get("user") in seen[1]
