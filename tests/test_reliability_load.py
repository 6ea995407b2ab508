"""`kb serve` under load (docs/reliability.md, case 4): 20 concurrent clients on 127.0.0.1 for a
bounded time (KB_LOAD_SECONDS, default 60), mixed /api/search and /api/ask, short questions and
200-line logs, while the served index is rebuilt by `kb ingest` and reloaded without a restart.

Checked: every request answered 200 with a right answer (no errors, none dropped), p50/p95
printed, the server's memory flat (one shared KnowledgeBase, not a copy per request), and
/api/health showing the new generation while requests keep succeeding.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest
from conftest import needs_shared
from helpers import kb_serve, request

from evaluation.stats import percentile

pytestmark = [pytest.mark.slow, needs_shared]

LOAD_SECONDS = float(os.environ.get("KB_LOAD_SECONDS", "60"))
CLIENTS = 20


# -- the traffic ---------------------------------------------------------------------------------
SHORT = [
    "NCCL error(2) unhandled system error",
    "Init plugin so failed, ret = 1343225860",
    "多机训练 NCCL 报错怎么办",
    "How do I choose the network interface for NCCL?",
    "修改主机名后需要重启吗",
    "np_tensor can not be split by strategy!",
]
LOG_KEYS = [
    (["ExternalError: Nccl error(2), unhandled system error"], "NCCL error(2)"),
    (["RuntimeError: Init plugin so failed, ret = 1343225860"], "1343225860"),
]


def log_200(rnd: random.Random) -> tuple[str, str]:
    """A fresh 200-line log (new noise every time, so the embedder really works) and the words
    the title of the entry that answers it contains."""
    key, title = rnd.choice(LOG_KEYS)
    lines = [
        rnd.choice(
            [
                f"I0510 09:{rnd.randint(10, 59)}:{rnd.randint(10, 59)}.{rnd.randint(100000, 999999)} "
                f"{rnd.randint(1000, 9999)} trainer.py:{rnd.randint(10, 400)}] epoch 0 step {i} loss {rnd.random():.4f}",
                f"[INFO] ME({rnd.randint(1000, 99999)}:1,MainProcess):2024-05-10-09:31:{rnd.randint(10, 59)} "
                f"[mindspore/train/callback.py:{rnd.randint(10, 900)}] step {i} done",
                f"gpu-node-{rnd.randint(10, 99)}:{rnd.randint(1000, 9999)} [{rnd.randint(0, 7)}] NCCL INFO "
                f"Channel {rnd.randint(0, 31):02d}/32 : 0 1 2 3 4 5 6 7",
            ]
        )
        for i in range(200 - 2 - len(key))
    ]
    lines += ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', *key]
    return "\n".join(lines), title


@dataclass
class Tally:
    latencies: dict = field(default_factory=lambda: {"search": [], "ask": []})
    sent: int = 0
    answered: int = 0
    wrong: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def client(n: int, port: int, expected: dict, stop: float, tally: Tally) -> None:
    rnd = random.Random(n)
    keep_alive = n % 2 == 0  # half the clients reuse a connection, half open one per request
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120) if keep_alive else None
    while time.monotonic() < stop:
        kind = rnd.choice(["search", "ask"])
        if rnd.random() < 0.5:
            query = rnd.choice(SHORT)
            want = expected[(kind, query)]
        else:
            query, want = log_200(rnd)
        with tally.lock:
            tally.sent += 1
        started = time.monotonic()
        try:
            status, body = request(port, "POST", f"/api/{kind}", {"query": query}, conn=conn)
        except Exception as e:  # a dropped connection, a timeout: counted, never hidden
            with tally.lock:
                tally.errors.append(f"{kind}: {type(e).__name__}: {e}")
            if keep_alive:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            continue
        took = time.monotonic() - started
        got = top_title(kind, body) if status == 200 else None
        with tally.lock:
            tally.answered += 1
            tally.latencies[kind].append(took)
            if status != 200:
                tally.errors.append(f"{kind}: HTTP {status}: {str(body)[:200]}")
            elif got is None or want not in got:
                tally.wrong.append((kind, query[-80:], want, got))
    if conn is not None:
        conn.close()


def top_title(kind: str, body: dict) -> str | None:
    if kind == "search":
        return body["hits"][0]["title"] if body.get("hits") else None
    return body["citations"][0]["title"] if body.get("citations") else None


# -- the test ------------------------------------------------------------------------------------
def _expected_answers(port: int) -> dict:
    """What each short question should get, asked one at a time before the load."""
    expected = {}
    for kind in ("search", "ask"):
        for q in SHORT:
            status, body = request(port, "POST", f"/api/{kind}", {"query": q})
            assert status == 200 and top_title(kind, body), (q, body)
            expected[(kind, q)] = top_title(kind, body)
    return expected


def _rebuild_and_watch(index, port: int, before: dict, stop: float, tally) -> dict:
    """Rebuild the served index with the real CLI, then watch /api/health for the new
    generation while the clients keep going."""
    rebuild = subprocess.run(
        [sys.executable, "-m", "kb", "ingest", "--index", str(index)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rebuild.returncode == 0, rebuild.stderr
    new_generation = json.loads((index / "manifest.json").read_text())["generation"]
    assert new_generation != before["generation"]
    watch = {"rebuilt_at": time.monotonic(), "seen_at": None, "health_failures": [], "answered_at_swap": None}
    while time.monotonic() < stop:
        status, health = request(port, "GET", "/api/health")
        if status != 200:
            watch["health_failures"].append(status)
        elif watch["seen_at"] is None and health["generation"] == new_generation:
            watch["seen_at"] = time.monotonic()
            watch["answered_at_swap"] = tally.answered
        time.sleep(0.5)
    return watch


def _report(tally, elapsed: float, started: float, watch: dict, rss_before: int, rss_after: int) -> None:
    n = tally.answered
    lat = tally.latencies["search"] + tally.latencies["ask"]
    print(
        f"\n{CLIENTS} clients x {elapsed:.0f}s: {n} requests ({n / elapsed:.1f}/s), "
        f"{len(tally.latencies['search'])} search / {len(tally.latencies['ask'])} ask; "
        f"latency p50 {percentile(lat, 0.5) * 1000:.0f} ms, p95 {percentile(lat, 0.95) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms "
        f"(search p95 {percentile(tally.latencies['search'], 0.95) * 1000:.0f} ms, "
        f"ask p95 {percentile(tally.latencies['ask'], 0.95) * 1000:.0f} ms)\n"
        f"rebuild took {watch['rebuilt_at'] - started - LOAD_SECONDS / 3:.1f}s; new generation served "
        f"{(watch['seen_at'] or float('nan')) - watch['rebuilt_at']:.1f}s after it landed; "
        f"server RSS {rss_before / 1024:.0f} -> {rss_after / 1024:.0f} MiB "
        f"({(rss_after - rss_before) * 1024 / max(n, 1):.0f} bytes/request)"
    )


def test_twenty_clients_with_a_rebuild_in_the_middle(seeds_index, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(seeds_index, index)
    with kb_serve(index, tmp_path / "serve.log") as srv:
        expected = _expected_answers(srv.port)
        _, before = request(srv.port, "GET", "/api/health")
        warm = Tally()
        client(99, srv.port, expected, time.monotonic() + 3, warm)  # fill the caches once
        assert not warm.errors and not warm.wrong, (warm.errors, warm.wrong)
        rss_before = srv.rss_kib()

        tally = Tally()
        started = time.monotonic()
        stop = started + LOAD_SECONDS
        threads = [
            threading.Thread(target=client, args=(n, srv.port, expected, stop, tally)) for n in range(CLIENTS)
        ]
        for t in threads:
            t.start()
        time.sleep(LOAD_SECONDS / 3)  # a third of the way in, the rebuild
        watch = _rebuild_and_watch(index, srv.port, before, stop, tally)
        for t in threads:
            t.join(timeout=180)
        elapsed = time.monotonic() - started
        rss_after = srv.rss_kib()
        log = srv.log.read_text()

    n = tally.answered
    _report(tally, elapsed, started, watch, rss_before, rss_after)
    assert tally.errors == [], tally.errors[:10]
    assert tally.sent == tally.answered  # nothing dropped
    assert tally.wrong == [], tally.wrong[:10]
    assert n >= CLIENTS * 10, n
    assert watch["health_failures"] == []
    assert watch["seen_at"] is not None, "the rebuilt index was not picked up"
    assert tally.answered > watch["answered_at_swap"]  # requests kept succeeding after the swap
    # One shared index: memory grows by a bounded cache, not by a copy per request.
    assert rss_after - rss_before < 200 * 1024, (rss_before, rss_after)
    assert (rss_after - rss_before) * 1024 / n < 64 * 1024
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]
