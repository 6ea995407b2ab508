"""BM25 over entry tokens, kept as a sparse matrix of precomputed term weights.

score(q, d) = sum over query terms t of idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
The per-(term, doc) factor does not depend on the query, so it is computed once at build time
and a search is one sparse matrix-vector product.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

K1 = 1.2
B = 0.75


class Bm25:
    def __init__(self, vocab: dict[str, int], weights, idf: np.ndarray) -> None:
        self.vocab = vocab
        self.weights = weights  # scipy.sparse CSC matrix (docs x terms)
        self.idf = idf

    @classmethod
    def build(cls, docs: list[list[str]]) -> Bm25:
        from scipy import sparse

        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[float] = []
        lengths = np.array([len(d) for d in docs], dtype=np.float32)
        avgdl = float(lengths.mean()) if len(docs) and lengths.mean() > 0 else 1.0
        df: Counter[int] = Counter()
        for i, doc in enumerate(docs):
            counts = Counter(doc)
            for term, tf in counts.items():
                j = vocab.setdefault(term, len(vocab))
                rows.append(i)
                cols.append(j)
                tfs.append(tf)
                df[j] += 1
        n = len(docs)
        idf = np.zeros(len(vocab), dtype=np.float32)
        for j, d in df.items():
            idf[j] = math.log(1 + (n - d + 0.5) / (d + 0.5))
        tf_arr = np.array(tfs, dtype=np.float32)
        dl = lengths[np.array(rows, dtype=np.int64)] if rows else np.zeros(0, dtype=np.float32)
        w = idf[np.array(cols, dtype=np.int64)] * tf_arr * (K1 + 1) / (tf_arr + K1 * (1 - B + B * dl / avgdl))
        weights = sparse.csc_matrix((w, (rows, cols)), shape=(n, len(vocab)), dtype=np.float32)
        return cls(vocab, weights, idf)

    @property
    def size(self) -> int:
        return self.weights.shape[0]

    def scores(self, tokens: list[str]) -> tuple[np.ndarray, float]:
        """BM25 score of every doc, and the largest score a doc could get for this query
        (the sum of its terms' best weights), used to tell a real match from scraps."""
        counts = Counter(t for t in tokens if t in self.vocab)
        if not counts or self.size == 0:
            return np.zeros(self.size, dtype=np.float32), 0.0
        cols = np.array([self.vocab[t] for t in counts], dtype=np.int64)
        # Repeated query terms count, but sub-linearly: a log repeating a word 50 times
        # should not drown out the rest of the query.
        qw = np.array([1.0 + math.log(c) for c in counts.values()], dtype=np.float32)
        sub = self.weights[:, cols]
        scores = np.asarray(sub @ qw).ravel()
        best = float((sub.max(axis=0).toarray().ravel() * qw).sum())
        return scores, best

    def save(self, directory: Path) -> None:
        from scipy import sparse

        sparse.save_npz(directory / "bm25.npz", self.weights.tocsc(), compressed=False)
        np.save(directory / "bm25_idf.npy", self.idf)
        (directory / "bm25_vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False), "utf-8")

    @classmethod
    def load(cls, directory: Path) -> Bm25:
        from scipy import sparse

        weights = sparse.load_npz(directory / "bm25.npz").tocsc()
        idf = np.load(directory / "bm25_idf.npy")
        vocab = json.loads((directory / "bm25_vocab.json").read_text("utf-8"))
        return cls(vocab, weights, idf)
