"""FAISS store: inner product over L2-normalised vectors (= cosine similarity)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Exact search is fast enough and loses nothing up to this many rows; above it, HNSW.
EXACT_MAX_ROWS = 200_000


class VectorStore:
    def __init__(self, index, dim: int) -> None:
        self._index = index
        self.dim = dim

    @classmethod
    def build(cls, vectors: np.ndarray) -> VectorStore:
        import faiss

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = vectors.shape[1]
        if len(vectors) <= EXACT_MAX_ROWS:
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 80
            index.hnsw.efSearch = 128
        if len(vectors):
            index.add(vectors)
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

        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        return cls(index, int(index.d))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row ids), each (len(queries), k'); rows of -1 are padding."""
        k = max(1, min(k, self.size))
        if self.size == 0:
            n = len(queries)
            return np.zeros((n, 0), dtype=np.float32), np.zeros((n, 0), dtype=np.int64)
        return self._index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
