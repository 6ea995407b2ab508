"""The seams of a search: what the searcher needs of an embedder, a vector index and a lexical
index, as small Protocols a caller can implement and pass in.

They are kept to the few methods search uses, so that another store (Milvus, behind both the
vector and the lexical seam) or another embedder (an OpenAI-compatible /v1/embeddings server)
plugs in without touching index/search.py:

- Embedder: texts -> L2-normalised float32 rows (inner product = cosine). Queries and documents
  are embedded by separate methods because some models (E5, BGE) expect different prefixes on
  each side; models without that distinction implement both the same way.
- VectorIndex: the rows nearest to several query vectors at once, each row with the entry it
  belongs to and its kind (title, signature, answer: see index/views.py).
- LexicalIndex: BM25 scores of a token list over the entries, and what the features need of the
  vocabulary: whether a token is known and its idf.

index/store.py loads the FAISS and BM25 implementations (index/vectors.py, index/lexical.py);
tests/fakes.py has a deterministic fake embedder for unit tests of these seams.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

Progress = Callable[[int, int], None]  # (done, total)


@runtime_checkable
class Embedder(Protocol):
    id: str  # recorded in the manifest; a different id means the vectors are not comparable
    dim: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised: what a user asks."""
        ...

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised: what the index holds."""
        ...


@dataclass(frozen=True)
class VectorHits:
    """The rows nearest to each query vector, best first: one line per query vector, padded
    with entry -1 when fewer rows exist."""

    scores: np.ndarray  # (n_queries, depth) float32 cosine
    entries: np.ndarray  # (n_queries, depth) int64 entry index of each row; -1 is padding
    kinds: np.ndarray  # (n_queries, depth) the kind of each row ("title", "signature", "answer")


@runtime_checkable
class VectorIndex(Protocol):
    @property
    def size(self) -> int:
        """Rows held."""
        ...

    @property
    def kind(self) -> str:
        """What kind of index it is ("flat", "ivf", ...), for reports."""
        ...

    def search(self, queries: np.ndarray, depth: int) -> VectorHits: ...


@runtime_checkable
class LexicalIndex(Protocol):
    @property
    def size(self) -> int:
        """Entries held (scores() returns one score per entry)."""
        ...

    @property
    def max_idf(self) -> float:
        """The largest idf of any known token (1.0 for an empty index)."""
        ...

    def scores(self, tokens: Sequence[str]) -> tuple[np.ndarray, float]:
        """BM25 score of every entry, and the most any entry could score for these tokens."""
        ...

    def idf(self, token: str) -> float | None:
        """The token's idf, None when the index never saw it."""
        ...

    def __contains__(self, token: object) -> bool: ...
