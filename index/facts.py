"""Per-entry facts, computed once when the index is built and stored in its generation.

What the features (index/features.py) and the gate (index/gate.py) compare a post with, per
entry: its tokens, its title's tokens, its error codes, its signatures as token sets, and its
shape (a question? a numbered section? how long?).

Until issue 13 these were computed at query time, for the 40-80 candidates of each search, and
kept in a per-process cache. A cold `kb search` therefore tokenized the bodies of its top
candidates, which loaded the Chinese segmenter (1.7 s for jieba) even for an English query:
0.94 s of a 1.7 s cold call in a profile. Now a build computes them (`facts_blob`), the
generation stores them (`facts.bin` + `facts.npz`, one JSON blob per entry, copied as bytes
for unchanged entries on a rebuild), and a search only decodes the blobs of its candidates.
The entry's own tokens are not stored twice: they are the terms of its BM25 document, which
the lexical index keeps per document (index/lexical.py `Bm25.doc_terms`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ingest.entry import Entry

from .codes import entry_codes
from .evidence import informative
from .text import clean_line, tokenize
from .topics import product_counts, profile, symptom_counts

SIGNATURE_CHARS = 1000  # of a signature line, for its token set
MIN_SIGNATURE_TOKENS = 2  # a signature with fewer informative tokens tells nothing apart

_QUESTION_TITLE = re.compile(
    r"[?？]\s*$|^\s*(Q\d*|问题)\s*[:：]|^\s*(how|what|why|when|which|can|does|is|should)\b|怎么|如何|为什么|吗",
    re.I,
)
_SECTION_TITLE = re.compile(r"^\s*(\d+(\.\d+)*\.?|[一二三四五六七八九十]+[、.])\s*\S")


def title_tokens(entry: Entry) -> set[str]:
    return informative(tokenize(clean_line(entry.title)))


def entry_shape(entry: Entry) -> tuple[float, float, float]:
    """What kind of entry it is: a question, a numbered section of a guide, how long."""
    return (
        1.0 if _QUESTION_TITLE.search(entry.title) else 0.0,
        1.0 if _SECTION_TITLE.match(entry.title) else 0.0,
        float(np.log1p(entry.end_line - entry.start_line + 1)),
    )


def entry_products(entry: Entry) -> list[int]:
    """Product mentions of an entry, its document's path and headings included (a document's
    profile is the sum over its entries: `document_products`)."""
    where = entry.doc.replace("_", " ").replace("/", " ")
    return product_counts(" ".join([where, *entry.heading_path, entry.title, entry.body]))


def document_products(entries: Sequence[Entry]) -> dict[str, list[int]]:
    """Product mentions per document, over all its entries (each document's entries are
    derived together: a file that changed is parsed whole)."""
    out: dict[str, list[int]] = {}
    for e in entries:
        counts = entry_products(e)
        total = out.setdefault(e.doc, [0] * len(counts))
        out[e.doc] = [a + b for a, b in zip(total, counts, strict=True)]
    return out


def facts_blob(entry: Entry, doc_products: Sequence[int]) -> bytes:
    """The stored facts of one entry (all but its tokens, which BM25 keeps); `doc_products`:
    its document's product mentions (`document_products`)."""
    sigs = []
    for k, s in enumerate(entry.signatures):
        tokens = informative(tokenize(clean_line(s)[:SIGNATURE_CHARS]))
        if len(tokens) >= MIN_SIGNATURE_TOKENS:
            sigs.append([k, sorted(tokens)])
    codes = sorted(entry_codes(entry.title, entry.body))
    symptoms = [
        symptom_counts(" ".join([entry.title, *entry.heading_path])),
        symptom_counts(entry.title + "\n" + entry.body),
    ]
    row = [sorted(title_tokens(entry)), codes, sigs, *entry_shape(entry), list(doc_products), symptoms]
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Facts:
    tokens: frozenset[str]
    title_tokens: set[str]
    codes: frozenset[str]
    signatures: tuple[tuple[str, frozenset[str]], ...]  # (signature, its informative tokens)
    is_question: float
    is_section: float
    lines: float
    products: np.ndarray  # profile of the entry's document over index/topics.py PRODUCTS
    title_symptoms: np.ndarray  # profile of its title over SYMPTOMS
    symptoms: np.ndarray  # and of its title and body


class FactsTable:
    """The stored blobs of a generation: `facts.bin` end to end, offsets in `facts.npz`."""

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob = blob
        self.offsets = offsets

    @classmethod
    def of(cls, blobs: Sequence[bytes | memoryview]) -> FactsTable:
        offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in blobs], out=offsets[1:])
        return cls(b"".join(blobs), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def take(self, idx) -> FactsTable:
        return FactsTable.of([self.blob_of(int(i)) for i in idx])

    def blob_of(self, i: int) -> memoryview:
        return memoryview(self.blob)[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def save(self, directory: Path) -> None:
        (directory / "facts.bin").write_bytes(self.blob)
        np.savez(directory / "facts.npz", offsets=self.offsets)

    @classmethod
    def load(cls, directory: Path) -> FactsTable:
        with np.load(directory / "facts.npz") as z:
            offsets = z["offsets"]
        blob = (directory / "facts.bin").read_bytes()
        if not len(offsets) or int(offsets[-1]) != len(blob):
            raise ValueError("facts.bin does not match facts.npz")
        return cls(blob, offsets)


class FactsWriter:
    """A new table from runs of an older one (copied as bytes) and new blobs."""

    def __init__(self) -> None:
        self._parts: list[bytes | memoryview] = []
        self._sizes: list[np.ndarray] = []

    def copy(self, old: FactsTable, start: int, stop: int) -> None:
        self._parts.append(memoryview(old.blob)[int(old.offsets[start]) : int(old.offsets[stop])])
        self._sizes.append(np.diff(old.offsets[start : stop + 1]))

    def add(self, blobs: list[bytes]) -> None:
        self._parts.extend(blobs)
        self._sizes.append(np.array([len(b) for b in blobs], dtype=np.int64))

    def finish(self) -> FactsTable:
        sizes = np.concatenate(self._sizes) if self._sizes else np.zeros(0, dtype=np.int64)
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return FactsTable(b"".join(self._parts), offsets)


class EntryFacts:
    """Facts by entry index, decoded from the table when first asked for and kept (at most one
    per entry, so bounded by the index whatever the queries)."""

    def __init__(
        self, table: FactsTable, entries: Sequence[Entry], doc_terms: Callable[[int], list[str]]
    ) -> None:
        self._table = table
        self._entries = entries
        self._doc_terms = doc_terms
        self._facts: dict[int, Facts] = {}
        self._lock = threading.Lock()

    def __getitem__(self, i: int) -> Facts:
        f = self._facts.get(i)
        if f is None:
            title, codes, sigs, is_question, is_section, lines, products, symptoms = json.loads(
                bytes(self._table.blob_of(i)).decode("utf-8", "surrogatepass")
            )
            signatures = self._entries[i].signatures if sigs else ()
            f = Facts(
                frozenset(self._doc_terms(i)),
                set(title),
                frozenset(codes),
                tuple((signatures[k], frozenset(tokens)) for k, tokens in sigs),
                is_question,
                is_section,
                lines,
                profile(products),
                profile(symptoms[0]),
                profile(symptoms[1]),
            )
            with self._lock:
                self._facts[i] = f
        return f
