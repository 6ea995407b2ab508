"""Stand-ins for unit tests: the fake embedder (the Embedder seam, index/seams.py; no model is
loaded) and entries made by hand."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ingest.entry import Entry


class FakeEmbedder:
    """A deterministic Embedder (index/seams.py) for unit tests of the seams: a text is the sum
    of one fixed random unit vector per lower-cased word, normalised, so texts that share words
    are near and the same text always gives the same vector. No model is loaded."""

    id = "fake/words-64"
    dim = 64

    def __init__(self) -> None:
        self.queries: list[str] = []  # what was embedded as a query, in order
        self.documents: list[str] = []

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in text.lower().split():
            seed = int.from_bytes(hashlib.sha1(word.encode()).digest()[:4], "little")
            v += np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queries.extend(texts)
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_documents(self, texts: Sequence[str], progress=None) -> np.ndarray:
        self.documents.extend(texts)
        out = np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        if progress:
            progress(len(texts), len(texts))
        return out


def entry(
    doc: str, start: int, end: int, title: str = "t", lang: str = "en", translation: str | None = None
) -> Entry:
    return Entry(
        id=f"{doc}:{start}",
        content_hash="h",
        doc=doc,
        lang=lang,
        title=title,
        heading_path=(),
        body="",
        start_line=start,
        end_line=end,
        translation=translation,
    )
