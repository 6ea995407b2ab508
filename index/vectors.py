"""Vector stores: inner product over L2-normalised vectors (= cosine similarity), in segments.

The index type follows the size (rows = embedded texts, about 2.5 per entry):
- up to EXACT_MAX_ROWS rows (about 20k entries): exact search, one matrix product in numpy
  (`FlatStore`). Nothing is lost, and a scan is cheap: measured here (2 cores, one thread),
  ~0.17 ms per 1,000 rows for a query of a few views, so under 10 ms at the threshold. numpy
  rather than FAISS's IndexFlatIP because they scan at the same speed (0.84 against 0.81 ms for
  3,000 rows and 6 views) and a process that only searches a flat index never imports FAISS:
  0.12 s of every cold `kb search` (issue 13);
- above: IVF (IndexIVFFlat), which scans only the NPROBE_FRACTION of its lists nearest to the
  query. At 100k entries (254k rows) exact search cost ~43 ms per query; IVF with 1,024 lists and
  64 probes cost ~4 ms with recall@10 0.993 of exact search (eval/bench.py measures it on every
  run). HNSW was tried first and dropped: on a corpus with many near-identical entries (the
  same FAQ for many products or versions, as the benchmark's is) its graph links fill up with
  duplicates, and recall@10 stayed at 0.71-0.77 even with efSearch 1,024. IVF puts duplicates in
  the same list and scores every row of a probed list exactly, so they cost it nothing. It also
  builds in seconds (HNSW: about a minute).
The `vector_index` setting (KB_VECTOR_INDEX=flat|ivf) forces a type (for measurements).

Segments: a generation's rows are a base segment and, after small rebuilds, a delta segment
(index/segments.py decides; `SegmentedVectors` searches both and merges). A rebuild after an
edit reuses the base's files as they are and writes only the changed rows; rows of the base
that no entry uses any more are excluded from its search (a selector inside FAISS, a mask in
numpy) rather than rewritten. Re-ingesting one edited file at 100k entries rebuilt IVF from
scratch (11.7 s) before.

Everything is read into memory, never memory-mapped. A mapped file that anything truncates or
rewrites in place (`cp other.index faiss.index`) kills the process with SIGBUS on the next
search, with nothing in the log (issue 17); a copy in memory cannot be changed under the server.
Mapping would save little: a flat segment is scanned whole by every search, so its pages are
resident anyway, and reading the corpus index's 6 MB of vectors takes ~3 ms.

Threads: a search (a handful of query vectors) runs on one OpenMP thread. On these 2-core
machines, shared with other work, a second thread mostly waits for a core: measured under load,
2 threads made searches 1.5-2x slower. Building uses the `index_threads` setting (KB_INDEX_THREADS;
default: up to 2).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
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

        index = faiss.read_index(str(path))  # into memory: see the module docstring
        return cls(index, int(index.d))

    def search(
        self, queries: np.ndarray, k: int, exclude: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row ids), each (len(queries), k'); rows of -1 are padding. Rows in `exclude`
        are never returned."""
        k = max(1, min(k, self.size))
        if self.size == 0:
            n = len(queries)
            return np.zeros((n, 0), dtype=np.float32), np.zeros((n, 0), dtype=np.int64)
        import faiss

        faiss.omp_set_num_threads(1)  # see the module docstring
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if exclude is None or not len(exclude):
            return self._index.search(q, k)
        batch = faiss.IDSelectorBatch(np.asarray(exclude, dtype=np.int64))
        not_excluded = faiss.IDSelectorNot(batch)
        if self.kind == "ivf":
            params = faiss.SearchParametersIVF(sel=not_excluded, nprobe=self._index.nprobe)  # type: ignore[call-arg]
        else:
            params = faiss.SearchParameters(sel=not_excluded)  # type: ignore[call-arg,assignment]
        return self._index.search(q, k, params=params)


class FlatStore:
    """Exact search in numpy over rows held in memory (see the module docstring)."""

    kind = "flat"

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.dim = self.vectors.shape[1] if self.vectors.ndim == 2 else 0

    @property
    def size(self) -> int:
        return len(self.vectors)

    def search(
        self, queries: np.ndarray, k: int, exclude: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        n_q = len(queries)
        k = min(k, self.size)
        if k <= 0:
            return np.zeros((n_q, 0), dtype=np.float32), np.zeros((n_q, 0), dtype=np.int64)
        with _one_blas_thread():
            scores = np.ascontiguousarray(queries, dtype=np.float32) @ self.vectors.T
        if exclude is not None and len(exclude):
            scores[:, exclude] = -np.inf
        top = (
            np.argpartition(-scores, k - 1, axis=1)[:, :k]
            if k < self.size
            else np.tile(np.arange(k), (n_q, 1))
        )
        top_scores = np.take_along_axis(scores, top, axis=1)
        order = np.lexsort((top, -top_scores), axis=1)  # best first; equal scores by row
        rows = np.take_along_axis(top, order, axis=1).astype(np.int64)
        best = np.take_along_axis(top_scores, order, axis=1)
        rows[~np.isfinite(best)] = -1  # excluded rows fill the tail only when too few are left
        return best.astype(np.float32), rows


def _one_blas_thread():
    """A search runs on one BLAS thread, like FAISS's (see the module docstring): the limit costs
    ~10 µs with the controller made once; without it OpenBLAS split a 3,000-row product over
    both cores and took 5.5 ms instead of 0.8 ms on the loaded machine."""
    return _blas_limit()(limits=1, user_api="blas")


@lru_cache(maxsize=1)
def _blas_limit():
    from threadpoolctl import ThreadpoolController  # scans the loaded libraries: once

    return ThreadpoolController().limit


KINDS = ("title", "signature", "answer")  # row kinds (index/views.py), stored as their position here


Store = FlatStore | VectorStore


class SegmentedVectors:
    """The VectorIndex seam over a generation's segments: rows are numbered through the segments
    in order, each row knows its entry and its kind, and a row whose entry is -1 is dead (its
    entry changed or left since the segment was written; never returned)."""

    def __init__(self, segments: list[Store], row_entry: np.ndarray, row_kind: np.ndarray) -> None:
        self.segments = segments
        self._row_entry = np.append(np.asarray(row_entry, dtype=np.int64), -1)  # row -1 -> entry -1
        self._row_kind = np.append(np.asarray(row_kind, dtype=object), "")
        self._parts = []  # (segment, first row, its dead rows)
        start = 0
        for seg in segments:
            dead = np.flatnonzero(self._row_entry[start : start + seg.size] < 0)
            self._parts.append((seg, start, dead))
            start += seg.size
        if start != len(self._row_entry) - 1:
            raise ValueError(f"the segments hold {start} rows, the row table {len(self._row_entry) - 1}")

    @classmethod
    def single(cls, store: Store, row_entry, row_kind) -> SegmentedVectors:
        return cls([store], np.asarray(row_entry), np.asarray(row_kind, dtype=object))

    @property
    def size(self) -> int:
        """Live rows."""
        return int((self._row_entry[:-1] >= 0).sum())

    @property
    def kind(self) -> str:
        return self.segments[0].kind if self.segments else "flat"

    def search(self, queries: np.ndarray, depth: int) -> VectorHits:
        found = []
        for seg, start, dead in self._parts:
            scores, rows = seg.search(queries, depth, dead)
            found.append((scores, np.where(rows >= 0, rows + start, -1)))
        if not found:
            n = len(queries)
            scores, rows = np.zeros((n, 0), dtype=np.float32), np.zeros((n, 0), dtype=np.int64)
        elif len(found) == 1:
            scores, rows = found[0]
        else:
            scores, rows = (np.concatenate(x, axis=1) for x in zip(*found, strict=True))
            scores = np.where(rows >= 0, scores, -np.inf)
            order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
            scores, rows = np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)
        return VectorHits(scores, self._row_entry[rows], self._row_kind[rows])

    @property
    def row_entries(self) -> np.ndarray:
        """Entry of every row, -1 for a dead one."""
        return self._row_entry[:-1]

    @property
    def row_kinds(self) -> list[str]:
        return list(self._row_kind[:-1])
