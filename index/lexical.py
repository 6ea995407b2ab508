"""BM25 over entry tokens, kept as a sparse matrix of precomputed term weights.

score(q, d) = sum over query terms t of idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
The per-(term, doc) factor does not depend on the query, so it is computed once at build time.
The matrix is stored column-wise (CSC: for each term, the docs that contain it and their
weights), so a search only reads the columns of the query's terms: a few thousand numbers, not
the whole index. Plain numpy arrays, in the file layout of `scipy.sparse.save_npz`, so a query
never imports scipy (about 0.3 s of a cold `kb search`).

Beside it, row-wise, each document's terms and counts (`doc_terms`, `doc_tf`): what a rebuild
copies for the documents that did not change (index/build.py: no unchanged entry is tokenized
again), and what the per-entry facts read as an entry's tokens (index/facts.py). From the rows,
the columns are one stable argsort away (0.4 s for the 6M terms of 100k entries).
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
        terms: list[str],
        data: np.ndarray,
        indices: np.ndarray,
        indptr: np.ndarray,
        idf: np.ndarray,
        rows: DocTerms,
    ) -> None:
        self.terms = terms  # term id -> term
        self.vocab = {t: j for j, t in enumerate(terms)}
        # CSC: the docs of term j are indices[indptr[j]:indptr[j+1]], their weights data[...].
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.idf_arr = idf  # per term, in term id order
        self.rows = rows
        self.n_docs = rows.n_docs

    @classmethod
    def build(cls, docs: Sequence[list[str]]) -> Bm25:
        """BM25 of token lists (doc i is docs[i])."""
        counts = CountsBuilder()
        counts.add(docs)
        return counts.finish()

    @classmethod
    def from_rows(cls, terms: list[str], rows: DocTerms) -> Bm25:
        """The weighted columns of documents given row-wise (term ids into `terms`)."""
        n = rows.n_docs
        lengths = rows.doc_len.astype(np.float32)
        avgdl = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        order = np.argsort(rows.doc_terms, kind="stable")  # by term; docs stay ascending within one
        col = rows.doc_terms[order]
        row = np.repeat(np.arange(n, dtype=np.int32), np.diff(rows.doc_ptr))[order]
        tf = rows.doc_tf[order].astype(np.float32)
        df = np.bincount(col, minlength=len(terms)).astype(np.float32)
        idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        w = idf[col] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[row] / avgdl))
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(df.astype(np.int64), out=indptr[1:])
        return cls(terms, w.astype(np.float32), row, indptr, idf, rows)

    def doc_terms(self, i: int) -> list[str]:
        """The distinct terms of document i."""
        terms = self.terms
        return [terms[j] for j in self.rows.of(i).tolist()]

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
        # The layout scipy.sparse.save_npz writes (uncompressed), readable by load_npz too, plus
        # the rows.
        np.savez(
            directory / "bm25.npz",
            indices=self.indices,
            indptr=self.indptr,
            format=np.array("csc"),
            shape=np.array([self.n_docs, len(self.terms)]),
            data=self.data,
            idf=self.idf_arr,
            doc_ptr=self.rows.doc_ptr,
            doc_terms=self.rows.doc_terms,
            doc_tf=self.rows.doc_tf,
            doc_len=self.rows.doc_len,
        )
        (directory / "bm25_terms.json").write_text(json.dumps(self.terms, ensure_ascii=False), "utf-8")

    @classmethod
    def load(cls, directory: Path) -> Bm25:
        with np.load(directory / "bm25.npz") as z:
            fmt = z["format"].item()
            fmt = fmt.decode("ascii") if isinstance(fmt, bytes) else str(fmt)
            if fmt != "csc":
                raise ValueError(f"bm25.npz holds a {fmt!r} matrix, expected csc")
            n_docs = int(z["shape"][0])
            data, indices, indptr, idf = z["data"], z["indices"], z["indptr"], z["idf"]
            rows = DocTerms(z["doc_ptr"], z["doc_terms"], z["doc_tf"], z["doc_len"])
        terms = json.loads((directory / "bm25_terms.json").read_text("utf-8"))
        if (
            len(indptr) != len(terms) + 1
            or len(data) != len(indices)
            or rows.n_docs != n_docs
            or len(idf) != len(terms)
        ):
            raise ValueError("bm25.npz does not match bm25_terms.json")
        return cls(terms, data.astype(np.float32, copy=False), indices, indptr, idf, rows)


class DocTerms:
    """Documents row-wise: doc i's term ids are doc_terms[doc_ptr[i]:doc_ptr[i+1]], their counts
    doc_tf[...]; doc_len[i] is its number of tokens."""

    def __init__(self, doc_ptr: np.ndarray, doc_terms: np.ndarray, doc_tf: np.ndarray, doc_len: np.ndarray):
        self.doc_ptr = doc_ptr
        self.doc_terms = doc_terms
        self.doc_tf = doc_tf
        self.doc_len = doc_len

    @property
    def n_docs(self) -> int:
        return len(self.doc_ptr) - 1

    def of(self, i: int) -> np.ndarray:
        return self.doc_terms[int(self.doc_ptr[i]) : int(self.doc_ptr[i + 1])]


class CountsBuilder:
    """Documents row-wise for a new index: runs copied from an older index (term ids carried
    over) and new token lists; `finish` drops the terms no document uses any more."""

    def __init__(self, previous: Bm25 | None = None) -> None:
        self.terms: list[str] = list(previous.terms) if previous is not None else []
        self._vocab: dict[str, int] = dict(previous.vocab) if previous is not None else {}
        self._lens: list[np.ndarray] = []  # terms per doc, per run
        self._ids: list[np.ndarray] = []
        self._tf: list[np.ndarray] = []
        self._doc_len: list[np.ndarray] = []

    def copy(self, previous: Bm25, start: int, stop: int) -> None:
        """Docs start..stop-1 of `previous` (whose terms this builder started from)."""
        r = previous.rows
        a, b = int(r.doc_ptr[start]), int(r.doc_ptr[stop])
        self._lens.append(np.diff(r.doc_ptr[start : stop + 1]))
        self._ids.append(r.doc_terms[a:b])
        self._tf.append(r.doc_tf[a:b])
        self._doc_len.append(r.doc_len[start:stop])

    def add(self, docs: Sequence[list[str]]) -> None:
        # Typed arrays, not lists: at 100k entries (6M term-doc pairs) lists of int objects
        # took ~0.5 GB of the build's peak memory.
        ids, tf = array("i"), array("l")
        lens = np.zeros(len(docs), dtype=np.int64)
        doc_len = np.zeros(len(docs), dtype=np.int32)
        vocab, terms = self._vocab, self.terms
        for i, doc in enumerate(docs):
            counts = Counter(doc)
            for term, c in counts.items():
                j = vocab.get(term)
                if j is None:
                    j = vocab[term] = len(terms)
                    terms.append(term)
                ids.append(j)
                tf.append(c)
            lens[i] = len(counts)
            doc_len[i] = len(doc)
        self._lens.append(lens)
        self._ids.append(np.frombuffer(ids, dtype=np.int32) if ids else np.zeros(0, np.int32))
        self._tf.append(np.minimum(np.frombuffer(tf, dtype=np.int64) if tf else np.zeros(0, np.int64), 65535))
        self._doc_len.append(doc_len)

    def finish(self) -> Bm25:
        def cat(parts, dtype):
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

        lens = cat(self._lens, np.int64)
        doc_ptr = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=doc_ptr[1:])
        ids, terms = cat(self._ids, np.int32), self.terms
        used = np.bincount(ids, minlength=len(terms)) > 0
        if not used.all():  # terms no doc uses any more (their docs changed) leave the vocabulary
            remap = (np.cumsum(used) - 1).astype(np.int32)
            ids = remap[ids]
            terms = [t for t, u in zip(terms, used.tolist(), strict=True) if u]
        rows = DocTerms(doc_ptr, ids, cat(self._tf, np.uint16), cat(self._doc_len, np.int32))
        return Bm25.from_rows(terms, rows)
