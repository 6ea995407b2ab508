"""The index reload policy, one for every door that runs for long (`kb serve`, `kb slack`).

Every request asks LiveKb for the KnowledgeBase. At most every RELOAD_CHECK_S seconds that call
also starts a background check for a rebuilt index; the swap inside `reload_if_changed` is
atomic, so requests never wait for a reload and never see half an index, and a rebuild that
does not load leaves the old index serving. Searches run concurrently (the web chat runs 4 at
once, Slack its listener pool): KnowledgeBase is safe for that, and big pastes take turns
inside it (kb/service.py).
"""

from __future__ import annotations

import logging
import threading
import time

from ...service import KnowledgeBase

log = logging.getLogger("kb.serve")

RELOAD_CHECK_S = 5.0  # how often (at most) a request looks for a rebuilt index


class LiveKb:
    """The one KnowledgeBase every request uses. At most every `interval` seconds a request
    starts a background check for a rebuilt index; the swap inside `reload_if_changed` is
    atomic, so requests never wait for a reload and never see half an index."""

    def __init__(self, kb: KnowledgeBase, interval: float = RELOAD_CHECK_S) -> None:
        self.kb = kb
        self.interval = interval
        self._next_check = time.monotonic() + interval
        self._checking = threading.Lock()

    def get(self) -> KnowledgeBase:
        now = time.monotonic()
        if now >= self._next_check and self._checking.acquire(blocking=False):
            self._next_check = now + self.interval
            threading.Thread(target=self._reload, name="kb-reload", daemon=True).start()
        return self.kb

    def _reload(self) -> None:
        try:
            if self.kb.reload_if_changed():
                log.warning("loaded the rebuilt index %s", self.kb.index.manifest.get("generation"))
        except Exception as e:  # a broken rebuild must not take the server down: keep the old index
            log.warning("could not load the rebuilt index (%s); still serving the old one", e)
        finally:
            self._checking.release()
