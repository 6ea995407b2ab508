"""The /v1/embeddings embedder (index/openai_embed.py) against a stand-in server this test starts
on 127.0.0.1: batching, the key, normalised rows in order, retries of 503 and of a slow answer,
no retry of 401, and the manifest naming it once an index is built with it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from index.openai_embed import EmbedderError, OpenAIEmbedder

DIM = 8


def _vector(text: str) -> list[float]:
    rng = np.random.default_rng(sum(map(ord, text)))
    return (rng.normal(size=DIM) * 3).tolist()  # not normalised: the embedder does that


class EmbeddingServer:
    """Answers POST /v1/embeddings like TEI or vLLM; `failures` answers go first (a status code,
    or "slow" to answer after the client's timeout)."""

    def __init__(self, failures: list = ()) -> None:
        self.requests: list[dict] = []
        self.failures = list(failures)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                failure = outer.failures.pop(0) if outer.failures else None
                if failure == "slow":
                    time.sleep(0.6)
                elif failure:
                    self.send_response(failure)
                    self.end_headers()
                    return
                data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])]
                payload = json.dumps({"object": "list", "data": data[::-1], "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_batches_normalised_rows_in_order_with_the_key():
    texts = [f"text number {i}" for i in range(7)]
    with EmbeddingServer() as server:
        emb = OpenAIEmbedder(server.base_url, "bge-m3", api_key="sk-test", batch=3, backoff=0)
        seen = []
        rows = emb.embed_documents(texts, progress=lambda d, n: seen.append((d, n)))
    assert [len(r["input"]) for r in server.requests] == [3, 3, 1]
    assert {r["path"] for r in server.requests} == {"/v1/embeddings"}
    assert {r["auth"] for r in server.requests} == {"Bearer sk-test"}
    assert {r["model"] for r in server.requests} == {"bge-m3"}
    assert seen == [(3, 7), (6, 7), (7, 7)]
    want = np.asarray([_vector(t) for t in texts], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert rows.dtype == np.float32 and np.allclose(rows, want, atol=1e-6)
    assert emb.dim == DIM and emb.id == "openai/bge-m3"


def test_retries_unavailable_and_slow_answers_then_succeeds():
    with EmbeddingServer(failures=[503, "slow"]) as server:
        emb = OpenAIEmbedder(server.base_url, "m", timeout=0.3, retries=2, backoff=0)
        rows = emb.embed_queries(["one question"])
    assert rows.shape == (1, DIM) and len(server.requests) == 3


def test_gives_up_with_a_message_that_names_the_server_not_the_key():
    with EmbeddingServer(failures=[401, 401]) as server:
        emb = OpenAIEmbedder(server.base_url, "m", api_key="sk-secret", retries=3, backoff=0)
        with pytest.raises(EmbedderError) as e:
            emb.embed_queries(["q"])
    assert len(server.requests) == 1  # 401 is not retried
    assert "HTTP 401" in str(e.value) and server.base_url in str(e.value) and "sk-secret" not in str(e.value)


def test_an_unreachable_server_is_an_error_after_the_retries():
    with EmbeddingServer() as server:
        url = server.base_url
    emb = OpenAIEmbedder(url, "m", timeout=0.5, retries=1, backoff=0)
    with pytest.raises(EmbedderError, match="after 2 attempt"):
        emb.embed_queries(["q"])


@pytest.mark.slow  # builds a real index
def test_the_settings_name_it_and_the_manifest_records_it(tmp_path, monkeypatch):
    from index.store import load
    from kb.config import load_settings
    from kb.indexing import bundled_docs, embedder_for, ingest

    with EmbeddingServer() as server:
        monkeypatch.setenv("KB_EMBEDDER", "openai:tiny-model")
        monkeypatch.setenv("KB_EMBED_BASE_URL", server.base_url)
        monkeypatch.setenv("KB_EMBED_API_KEY", "sk-from-env")
        settings = load_settings()
        emb = embedder_for(settings)
        assert isinstance(emb, OpenAIEmbedder) and emb.id == "openai/tiny-model"
        ingest([str(bundled_docs() / "en")], tmp_path / "idx", settings)
        loaded = load(tmp_path / "idx", "openai/tiny-model")
    assert loaded.manifest["embedder"] == {"id": "openai/tiny-model", "dim": DIM}
    assert {r["auth"] for r in server.requests} == {"Bearer sk-from-env"}
