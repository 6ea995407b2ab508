"""BM25 over entry tokens, kept as a sparse matrix of precomputed term weights.

score(q, d) = sum over query terms t of idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
The per-(term, doc) factor does not depend on the query, so it is computed once at build time.
The matrix is stored column-wise (CSC: for each term, the docs that contain it and their
weights), so a search only reads the columns of the query's terms: a few thousand numbers, not
the whole index. Plain numpy arrays, in the file layout of `scipy.sparse.save_npz`, so a query
never imports scipy (about 0.3 s of a cold `kb search`).
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

K1 = 1.2
B = 0.75


class Bm25:
    def __init__(
        self,
        vocab: dict[str, int],
        data: np.ndarray,
        indices: np.ndarray,
        indptr: np.ndarray,
        n_docs: int,
        idf: np.ndarray,
        counts: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.vocab = vocab
        # CSC: the docs of term j are indices[indptr[j]:indptr[j+1]], their weights data[...].
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.n_docs = n_docs
        self.idf_arr = idf  # per term, in vocabulary order
        # What a rebuild reuses (read only by a build): raw term counts in the same layout
        # ("tf"), doc lengths ("doc_len") and a key per doc ("keys", see store.py).
        self.counts = counts

    @classmethod
    def build(
        cls,
        docs: Sequence[list[str] | None],
        keys: Sequence[str] | None = None,
        previous: Bm25 | None = None,
    ) -> Bm25:
        """docs[i] is doc i's token list, or None when `previous` has a doc with key keys[i]:
        then its term counts are copied from there instead of tokenizing the text again
        (re-ingesting 10k entries after one edit spent most of its time re-tokenizing)."""
        vocab: dict[str, int] = dict(previous.vocab) if previous is not None else {}
        lengths = np.zeros(len(docs), dtype=np.float32)
        row, col, tf = _term_counts(docs, keys, previous, vocab, lengths)
        n = len(docs)
        # Terms no doc uses any more (their docs changed) leave the vocabulary.
        used = np.zeros(len(vocab), dtype=bool)
        used[col] = True
        if not used.all():
            remap = np.cumsum(used) - 1
            col = remap[col]
            vocab = {t: int(remap[j]) for t, j in vocab.items() if used[j]}
        avgdl = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        df = np.bincount(col, minlength=len(vocab)).astype(np.float32)
        idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        w = idf[col] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[row] / avgdl))
        order = np.lexsort((row, col))  # column-major, docs ascending within a column
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df.astype(np.int64), out=indptr[1:])
        counts: dict[str, np.ndarray] = {
            "tf": np.minimum(tf[order], 65535).astype(np.uint16),
            "doc_len": lengths.astype(np.int32),
            "keys": np.array(list(keys) if keys is not None else [""] * n, dtype="S40"),
        }
        return cls(vocab, w[order].astype(np.float32), row[order].astype(np.int32), indptr, n, idf, counts)

    def key_rows(self) -> dict[str, int]:
        """Doc key -> row, for the docs a rebuild can copy (none without stored counts)."""
        if not self.counts:
            return {}
        return {k.decode(): i for i, k in enumerate(self.counts["keys"].tolist()) if k}

    def _counts_of(self, old: np.ndarray, new: np.ndarray):
        """(row, term, tf) triples of docs `old`, renumbered as docs `new`; and their lengths."""
        by_doc = np.argsort(self.indices, kind="stable")  # nonzeros grouped by doc
        doc_ptr = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.indices, minlength=self.n_docs), out=doc_ptr[1:])
        term_of = np.repeat(np.arange(len(self.indptr) - 1), np.diff(self.indptr))
        lens = doc_ptr[old + 1] - doc_ptr[old]
        starts = np.repeat(doc_ptr[old] - np.cumsum(lens) + lens, lens)
        picks = by_doc[starts + np.arange(lens.sum())]
        assert self.counts is not None  # only an index loaded with counts=True is reused
        tf = self.counts["tf"][picks].astype(np.float32)
        return np.repeat(new, lens), term_of[picks], tf, self.counts["doc_len"][old].astype(np.float32)

    @property
    def size(self) -> int:
        return self.n_docs

    # -- what the features need of the vocabulary (the LexicalIndex seam, index/seams.py) --------
    def __contains__(self, token: object) -> bool:
        return token in self.vocab

    def idf(self, token: str) -> float | None:
        j = self.vocab.get(token)
        return None if j is None else float(self.idf_arr[j])

    @property
    def max_idf(self) -> float:
        return float(self.idf_arr.max()) if len(self.idf_arr) else 1.0

    def scores(self, tokens: Sequence[str]) -> tuple[np.ndarray, float]:
        """BM25 score of every doc, and the largest score a doc could get for this query
        (the sum of its terms' best weights), used to tell a real match from scraps."""
        counts = Counter(t for t in tokens if t in self.vocab)
        if not counts or self.n_docs == 0:
            return np.zeros(self.n_docs, dtype=np.float32), 0.0
        docs: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        best = 0.0
        for term, c in counts.items():
            j = self.vocab[term]
            lo, hi = int(self.indptr[j]), int(self.indptr[j + 1])
            # Repeated query terms count, but sub-linearly: a log repeating a word 50 times
            # should not drown out the rest of the query.
            qw = 1.0 + math.log(c)
            col = self.data[lo:hi]
            docs.append(self.indices[lo:hi])
            weights.append(col * np.float32(qw))
            best += float(col.max()) * qw if hi > lo else 0.0
        scores = np.bincount(np.concatenate(docs), weights=np.concatenate(weights), minlength=self.n_docs)
        return scores.astype(np.float32), best

    def save(self, directory: Path) -> None:
        # The layout scipy.sparse.save_npz writes (uncompressed), readable by load_npz too.
        arrays: dict[str, np.ndarray] = {
            "indices": self.indices,
            "indptr": self.indptr,
            "format": np.array("csc"),
            "shape": np.array([self.n_docs, len(self.vocab)]),
            "data": self.data,
            **(self.counts or {}),
        }
        np.savez(directory / "bm25.npz", **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle
        np.save(directory / "bm25_idf.npy", self.idf_arr)
        (directory / "bm25_vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False), "utf-8")

    @classmethod
    def load(cls, directory: Path, counts: bool = False) -> Bm25:
        """counts=True also reads what a rebuild reuses (when the file has it)."""
        with np.load(directory / "bm25.npz") as z:
            fmt = z["format"].item()
            fmt = fmt.decode("ascii") if isinstance(fmt, bytes) else str(fmt)
            if fmt != "csc":
                raise ValueError(f"bm25.npz holds a {fmt!r} matrix, expected csc")
            n_docs = int(z["shape"][0])
            data, indices, indptr = z["data"], z["indices"], z["indptr"]
            extra = {k: z[k] for k in ("tf", "doc_len", "keys")} if counts and "tf" in z.files else None
        idf = np.load(directory / "bm25_idf.npy")
        vocab = json.loads((directory / "bm25_vocab.json").read_text("utf-8"))
        if len(indptr) != len(vocab) + 1 or len(data) != len(indices):
            raise ValueError("bm25.npz does not match bm25_vocab.json")
        return cls(vocab, data.astype(np.float32, copy=False), indices, indptr, n_docs, idf, extra)


def _term_counts(docs, keys, previous: Bm25 | None, vocab: dict[str, int], lengths: np.ndarray):
    """(doc, term, count) triples of every doc, new terms added to `vocab` and doc lengths to
    `lengths`; a doc given as None is copied from `previous` by its key."""
    # Typed arrays, not lists: at 100k entries (6M term-doc pairs) lists of int objects
    # took ~0.5 GB of the build's peak memory.
    rows, cols, counts_ = array("q"), array("q"), array("f")
    reuse_new: list[int] = []
    reuse_old: list[int] = []
    old_row = previous.key_rows() if previous is not None else {}
    for i, doc in enumerate(docs):
        if doc is None:
            assert keys is not None  # a reused doc is found by its key
            reuse_new.append(i)
            reuse_old.append(old_row[keys[i]])
            continue
        for term, count in Counter(doc).items():
            cols.append(vocab.setdefault(term, len(vocab)))
            rows.append(i)
            counts_.append(count)
        lengths[i] = len(doc)
    row = np.frombuffer(rows, dtype=np.int64) if rows else np.zeros(0, dtype=np.int64)
    col = np.frombuffer(cols, dtype=np.int64) if cols else np.zeros(0, dtype=np.int64)
    tf = np.frombuffer(counts_, dtype=np.float32) if counts_ else np.zeros(0, dtype=np.float32)
    if reuse_new:
        assert previous is not None
        r_row, r_col, r_tf, r_len = previous._counts_of(np.array(reuse_old), np.array(reuse_new))
        row, col, tf = (
            np.concatenate([row, r_row]),
            np.concatenate([col, r_col]),
            np.concatenate([tf, r_tf]),
        )
        lengths[reuse_new] = r_len
    return row, col, tf
