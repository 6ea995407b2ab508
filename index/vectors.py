"""FAISS store: inner product over L2-normalised vectors (= cosine similarity).

The index type follows the size (rows = embedded texts, about 2.5 per entry):
- up to EXACT_MAX_ROWS rows (about 20k entries): exact search, IndexFlatIP. Nothing is lost,
  and a scan is cheap: measured here (2 cores, one thread), ~0.17 ms per 1,000 rows for a query
  of a few views, so under 10 ms at the threshold;
- above: IVF (IndexIVFFlat), which scans only the NPROBE_FRACTION of its lists nearest to the
  query. At 100k entries (254k rows) exact search cost ~43 ms per query; IVF with 1,024 lists and
  64 probes cost ~4 ms with recall@10 0.993 of exact search (eval/bench.py measures it on every
  run). HNSW was tried first and dropped: on a corpus with many near-identical entries (the
  same FAQ for many products or versions, as the benchmark's is) its graph links fill up with
  duplicates, and recall@10 stayed at 0.71-0.77 even with efSearch 1,024. IVF puts duplicates in
  the same list and scores every row of a probed list exactly, so they cost it nothing. It also
  builds in seconds (HNSW: about a minute).
The `vector_index` setting (KB_VECTOR_INDEX=flat|ivf) forces a type (for measurements).

Threads: a search (a handful of query vectors) runs on one OpenMP thread. On these 2-core
machines, shared with other work, a second thread mostly waits for a core: measured under load,
2 threads made searches 1.5-2x slower. Building uses the `index_threads` setting (KB_INDEX_THREADS;
default: up to 2).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .seams import VectorHits

EXACT_MAX_ROWS = 50_000
IVF_MIN_LISTS = 64
NPROBE_FRACTION = 1 / 16  # lists scanned per query vector
TRAIN_POINTS_PER_LIST = 64  # k-means sample: faiss wants at least 39 points per centroid


def ivf_lists(rows: int) -> int:
    """About 2 * sqrt(rows) lists, a power of two: 1,024 for 254k rows (~250 rows a list)."""
    return max(IVF_MIN_LISTS, 2 ** round(math.log2(max(1.0, 2 * math.sqrt(rows)))))


class VectorStore:
    def __init__(self, index, dim: int) -> None:
        self._index = index
        self.dim = dim

    @property
    def kind(self) -> str:
        if hasattr(self._index, "nprobe"):
            return "ivf"
        return "hnsw" if hasattr(self._index, "hnsw") else "flat"  # hnsw: indexes written earlier

    @classmethod
    def build(cls, vectors: np.ndarray, kind: str = "auto", threads: int = 0) -> VectorStore:
        """kind: "auto", "flat" or "ivf"; threads for building an IVF index (0: up to 2)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if kind in ("", "auto"):
            kind = "flat" if len(vectors) <= EXACT_MAX_ROWS else "ivf"
        return cls.exact(vectors) if kind == "flat" else cls._ivf(vectors, threads)

    @classmethod
    def exact(cls, vectors: np.ndarray) -> VectorStore:
        import faiss

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index = faiss.IndexFlatIP(vectors.shape[1])
        if len(vectors):
            index.add(vectors)
        return cls(index, vectors.shape[1])

    @classmethod
    def _ivf(cls, vectors: np.ndarray, threads: int = 0) -> VectorStore:
        import faiss

        faiss.omp_set_num_threads(threads or min(2, os.cpu_count() or 1))
        dim, n = vectors.shape[1], len(vectors)
        nlist = min(ivf_lists(n), max(1, n // 39))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        # A fixed sample (seeded) keeps builds of the same vectors identical.
        sample = n if n <= TRAIN_POINTS_PER_LIST * nlist else TRAIN_POINTS_PER_LIST * nlist
        picks = np.sort(np.random.default_rng(0).choice(n, sample, replace=False))
        index.train(vectors[picks])
        index.add(vectors)
        index.nprobe = max(1, round(nlist * NPROBE_FRACTION))
        return cls(index, dim)

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    def save(self, path: Path) -> None:
        import faiss

        faiss.write_index(self._index, str(path))

    @classmethod
    def load(cls, path: Path) -> VectorStore:
        import faiss

        # Read into memory, not memory-mapped. A mapped file that anything truncates or rewrites in
        # place (`cp other.index faiss.index`) kills the process with SIGBUS on the next search,
        # with nothing in the log; a copy in memory cannot be changed under the server. It costs
        # little: a flat index is scanned whole by every search, so its pages were resident anyway.
        index = faiss.read_index(str(path))
        return cls(index, int(index.d))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row ids), each (len(queries), k'); rows of -1 are padding."""
        k = max(1, min(k, self.size))
        if self.size == 0:
            n = len(queries)
            return np.zeros((n, 0), dtype=np.float32), np.zeros((n, 0), dtype=np.int64)
        import faiss

        faiss.omp_set_num_threads(1)  # see the module docstring
        return self._index.search(np.ascontiguousarray(queries, dtype=np.float32), k)


class FaissVectors:
    """The VectorIndex seam over a FAISS store: each row knows its entry and its kind (the
    table index/store.py writes as rows.json beside faiss.index)."""

    def __init__(self, store: VectorStore, row_entry: np.ndarray, row_kind: list[str]) -> None:
        self.store = store
        self._row_entry = np.append(np.asarray(row_entry, dtype=np.int64), -1)  # row -1 -> entry -1
        self._row_kind = np.append(np.asarray(row_kind, dtype=object), "")

    @property
    def size(self) -> int:
        return self.store.size

    @property
    def kind(self) -> str:
        return self.store.kind

    def search(self, queries: np.ndarray, depth: int) -> VectorHits:
        scores, rows = self.store.search(queries, depth)
        return VectorHits(scores, self._row_entry[rows], self._row_kind[rows])

    @property
    def row_entries(self) -> np.ndarray:
        return self._row_entry[:-1]

    @property
    def row_kinds(self) -> list[str]:
        return list(self._row_kind[:-1])
