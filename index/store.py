"""The index directory: plain files plus `manifest.json`; reading it is this module's job.

Layout (format 2):
    DIR/manifest.json        which generation is live, embedder id/dim, sources, counts
    DIR/gen-<stamp>/         one complete build, never modified once written:
        entries.bin, entries.npz     the entries (index/entries.py), read one by one as needed
        facts.bin, facts.npz         what the features know of each entry (index/facts.py)
        bm25.npz, bm25_terms.json    the lexical index (index/lexical.py)
        vectors.json, rows.npz       the vector segments and every row's entry, kind, text hash
        seg-<id>.npy, seg-<id>.faiss the segments (index/segments.py; .faiss for IVF only)
        files.json                   per source file: its hash and entries (index/previous.py)
index/build.py writes a generation; `load` opens the live one as a LoadedIndex whose vectors
and words are reached only through the seams of index/seams.py. No module outside index/ reads
these files or the stores' internals: evaluation asks for a language subset (`subset`) and the
benchmark for an exact copy of the vectors (`exact_vectors`) here.

Format 2 (issue 13) replaced format 1 (entries.jsonl, rows.json, vectors.npy, faiss.index,
bm25_vocab.json): the tokenizer changed (jieba -> rjieba), per-entry facts are stored, and the
parts are laid out so that a rebuild copies what did not change. `kb ingest` upgrades an index of
format 1 and reuses its vectors. Format 3 added the topic profiles to the facts; format 4
(stop 81) adds the stems of an English entry's words to its BM25 terms (index/text.py), which a
post's terms now carry: `kb ingest` rebuilds an index of format 3, reusing its vectors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ingest.errors import KbError

from .entries import EntryTable
from .facts import EntryFacts, FactsTable
from .lexical import Bm25
from .seams import LexicalIndex, VectorIndex
from .segments import PreviousVectors, load_vectors
from .vectors import FlatStore, SegmentedVectors
from .views import lexical_tokens

FORMAT_VERSION = 4


class IndexError_(KbError):
    """The index cannot be used as it is; the message says what to run."""


@runtime_checkable
class TermRows(Protocol):
    """A lexical index that keeps each entry's terms (Bm25; the Milvus store's vocabulary)."""

    def doc_terms(self, i: int) -> list[str]: ...


@dataclass
class LoadedIndex:
    directory: Path
    manifest: dict
    entries: EntryTable
    vectors: VectorIndex
    lexical: LexicalIndex
    facts_table: FactsTable

    @cached_property
    def by_id(self) -> dict[str, int]:
        return {e_id: i for i, e_id in enumerate(self.entries.ids)}

    def facts(self) -> EntryFacts:
        """What the features know of each entry (tokens from the lexical index)."""
        lexical = self.lexical
        assert isinstance(lexical, TermRows)
        return EntryFacts(self.facts_table, self.entries, lexical.doc_terms)


_GENERATION_NAME = re.compile(r"(?!\.{1,2}$)[\w.-]+")  # one folder name: no separator, not . or ..


def read_manifest(directory: Path) -> dict | None:
    path = directory / "manifest.json"
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise IndexError_(
            f"{path} is unreadable ({e}); rebuild it with `kb ingest PATH --index {directory}`"
        ) from e
    # Its shape too: a generation is a folder beside it (never a path elsewhere), the embedder a record.
    generation = manifest.get("generation") if isinstance(manifest, dict) else None
    if (
        not isinstance(generation, str)
        or not _GENERATION_NAME.fullmatch(generation)
        or not isinstance(manifest.get("embedder", {}), dict)
    ):
        raise IndexError_(f"{path} is damaged; rebuild it with `kb ingest PATH --index {directory}`")
    return manifest


def _check(directory: Path, manifest: dict, embedder: str | None) -> None:
    if manifest.get("format") != FORMAT_VERSION:
        raise IndexError_(
            f"index at {directory} has format {manifest.get('format')}, this kb reads {FORMAT_VERSION}; "
            f"rebuild it with `kb ingest --index {directory}`"
        )
    if embedder is not None:
        have = manifest.get("embedder", {}).get("id")
        if embedder != have:
            raise IndexError_(
                f"index at {directory} was built with embedder {have!r} but {embedder!r} is configured; "
                f"rebuild it with `kb ingest --index {directory}` or configure embedder {have!r}"
            )


def load(directory: Path, embedder: str | None = None) -> LoadedIndex:
    """The live generation; `embedder` is the id of the embedder that will query it (checked
    against the one that built it), None to skip the check."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        raise IndexError_(f"no index at {directory}; build one with `kb ingest PATH --index {directory}`")
    _check(directory, manifest, embedder)
    gen = directory / manifest["generation"]
    try:
        entries = EntryTable.load(gen)
        vectors = load_vectors(gen)
        bm25 = Bm25.load(gen)
        facts = FactsTable.load(gen)
    except Exception as e:
        raise IndexError_(
            f"index at {directory} is damaged ({type(e).__name__}: {e}); rebuild it with `kb ingest --index {directory}`"
        ) from e
    live = vectors.row_entries
    if bm25.size != len(entries) or len(facts) != len(entries) or (len(live) and live.max() >= len(entries)):
        raise IndexError_(
            f"index at {directory} is inconsistent; rebuild it with `kb ingest --index {directory}`"
        )
    return LoadedIndex(directory, manifest, entries, vectors, bm25, facts)


def _live_vectors(loaded: LoadedIndex) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every live row's vector, entry and kind."""
    prev = PreviousVectors.open(loaded.directory / loaded.manifest["generation"])
    if prev is None:
        raise IndexError_(f"index at {loaded.directory} is damaged; rebuild it with `kb ingest`")
    assert isinstance(loaded.vectors, SegmentedVectors)
    row_entry, row_kind = loaded.vectors.row_entries, loaded.vectors.row_kinds
    live = np.flatnonzero(row_entry >= 0)
    return prev.vectors(live), row_entry[live], [row_kind[r] for r in live]


def subset(loaded: LoadedIndex, langs: set[str]) -> LoadedIndex:
    """The index restricted to some languages, as if only their documents had been ingested:
    vectors reused (an exact index of the kept rows), BM25 statistics recomputed, links to
    dropped entries cleared. `kb eval` runs the single-language gold sets against it."""
    keep = [i for i, lang in enumerate(loaded.entries.langs) if lang in langs]
    if len(keep) == len(loaded.entries):
        return loaded
    kept_ids = {loaded.entries.ids[i] for i in keep}
    entries = [
        replace(e, translation=e.translation if e.translation in kept_ids else None)
        for e in (loaded.entries[i] for i in keep)
    ]
    new_pos = np.full(len(loaded.entries), -1, dtype=np.int64)
    new_pos[keep] = np.arange(len(keep))
    vecs, row_entry, row_kind = _live_vectors(loaded)
    rows = np.flatnonzero(new_pos[row_entry] >= 0)
    vectors = SegmentedVectors.single(
        FlatStore(vecs[rows]), new_pos[row_entry[rows]], [row_kind[r] for r in rows]
    )
    manifest = dict(loaded.manifest, counts={"entries": len(entries), "langs": sorted(langs)})
    lexical = Bm25.build([lexical_tokens(e) for e in entries])
    return LoadedIndex(
        loaded.directory, manifest, EntryTable.of(entries), vectors, lexical, loaded.facts_table.take(keep)
    )


def exact_vectors(loaded: LoadedIndex) -> VectorIndex:
    """The same rows in an exact (flat) index: what an approximate index's recall is measured
    against (eval/bench.py)."""
    vecs, row_entry, row_kind = _live_vectors(loaded)
    return SegmentedVectors.single(FlatStore(vecs), row_entry, row_kind)
