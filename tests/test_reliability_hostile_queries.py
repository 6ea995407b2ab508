"""Hostile queries against a real `kb serve` (docs/reliability.md, section 7): memory stays flat
under huge unique error lines, and short questions stay answered quickly while other clients
send the most expensive queries the size limit allows.

Both are bounded tests on purpose: they guard a property (memory does not grow with unique
lines; one client cannot starve the others), with limits far from today's numbers; the
timings themselves are measured by eval/bench_hostile.py.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time

import pytest
from conftest import needs_shared
from helpers import kb_serve, request

from evaluation.stats import percentile

pytestmark = [pytest.mark.slow, needs_shared]

LIMIT = 2 * 1024 * 1024  # the default KB_MAX_QUERY_BYTES
BODY = LIMIT - 64 * 1024  # what fits under the limit with room for the JSON around it


def hostile_queries(seed: int) -> list[str]:
    """The query shapes that cost the most before the per-request bounds (issue 17, item 3)."""
    rnd = random.Random(seed)
    words = ["".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(3, 9))) for _ in range(5000)]
    prose = " ".join(rnd.choices(words, k=BODY // 7))[: BODY - 100]
    return [
        ("训练报错内存不足" * (BODY // 24))[: BODY // 3],  # one line of Chinese: 3 bytes a character
        "error: " + prose,  # megabytes of prose with "error" in it
        ("\x1b[31mERROR\x1b[0m failed " * (BODY // 30))[:BODY],  # an ANSI-escape flood
        "NCCL WARN Connect failed\n" * (BODY // 25),  # hundreds of thousands of identical lines
    ]


def body_of(query: str) -> bytes:
    """The request body, at most the size limit (a 2 MB query in JSON grows by its escapes)."""
    while True:
        data = json.dumps({"query": query}, ensure_ascii=False).encode()
        if len(data) <= LIMIT:
            return data
        query = query[: int(len(query) * LIMIT / len(data)) - 16]


def post(port: int, data: bytes, conn: http.client.HTTPConnection) -> int:
    conn.request("POST", "/api/search", data, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    return resp.status


def unique_error_line(i: int, filler: str) -> str:
    """A different 2 MB error line every time: caches keyed by whole lines would keep each one."""
    return f"RuntimeError: worker {i} crashed: {filler[: BODY - 64]}"


def test_huge_unique_error_lines_leave_the_memory_where_it_was(seeds_index, tmp_path):
    rnd = random.Random(7)
    filler = "".join(rnd.choices("abcdefghij klmnopqrstuvwxyz", k=BODY))
    with kb_serve(seeds_index, tmp_path / "serve.log") as srv:
        for i in range(20):  # warm-up: allocator arenas, lazily built per-entry facts
            status, _ = request(srv.port, "POST", "/api/search", {"query": unique_error_line(-i - 1, filler)})
            assert status == 200
        before = srv.rss_kib()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        for i in range(200):
            assert post(srv.port, body_of(unique_error_line(i, filler)), conn) == 200
        conn.close()
        after = srv.rss_kib()
    print(f"\nRSS {before / 1024:.0f} -> {after / 1024:.0f} MiB after 200 unique 2 MB error lines")
    assert after - before < 50 * 1024, (before, after)


def test_short_questions_stay_quick_while_four_clients_send_the_costliest_queries(seeds_index, tmp_path):
    stop = threading.Event()
    errors: list[str] = []

    def hostile(n: int) -> None:
        bodies = [body_of(q) for q in hostile_queries(n)]  # encoded once: the clients cost little CPU
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        k = 0
        while not stop.is_set():
            try:
                status = post(srv.port, bodies[k % len(bodies)], conn)
                if status != 200:
                    errors.append(f"hostile HTTP {status}")
            except Exception as e:  # counted, never hidden
                errors.append(f"hostile {type(e).__name__}: {e}")
                conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
            k += 1
        conn.close()

    with kb_serve(seeds_index, tmp_path / "serve.log") as srv:
        for q in ("NCCL error(2) unhandled system error", "多机训练 NCCL 超时怎么办"):
            request(srv.port, "POST", "/api/search", {"query": q})  # warm-up
        clients = [threading.Thread(target=hostile, args=(n,)) for n in range(4)]
        for t in clients:
            t.start()
        time.sleep(2)  # the hostile clients are sending
        latencies = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            status, body = request(
                srv.port, "POST", "/api/search", {"query": "NCCL error(2) unhandled system error"}
            )
            latencies.append(time.monotonic() - t0)
            assert status == 200 and body["hits"][0]["title"] == "NCCL error(2)"
            time.sleep(0.1)
        stop.set()
        for t in clients:
            t.join(timeout=60)
    p95 = percentile(latencies, 0.95)
    print(
        f"\nshort question under 4 hostile clients: p50 {percentile(latencies, 0.5) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
    )
    assert errors == [], errors[:5]
    # Not a speed measurement (eval/bench_hostile.py is): a bound on starvation. Before the work per
    # request was bounded, the short question's p95 here was 1.4 s; measured after, 0.15-0.3 s
    # depending on what else the machine runs. The bound is 1 s for any request.
    assert p95 <= 1.0, f"p95 {p95 * 1000:.0f} ms"
