"""The index directory: plain files plus `manifest.json`; reading it is this module's job.

Layout:
    DIR/manifest.json        which generation is live, embedder id/dim, sources, per-entry hashes
    DIR/gen-<stamp>/         one complete build: entries.jsonl, rows.json, vectors.npy,
                             faiss.index, bm25*.{npz,npy,json}
index/build.py writes a generation; `load` opens the live one as a LoadedIndex whose vectors
and words are reached only through the seams of index/seams.py. No module outside index/ reads
these files or the stores' internals: evaluation asks for a language subset (`subset`) and the
benchmark for an exact copy of the vectors (`exact_vectors`) here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from ingest.entry import Entry
from ingest.errors import KbError

from .lexical import Bm25
from .seams import LexicalIndex, VectorIndex
from .vectors import FaissVectors, VectorStore
from .views import lexical_tokens

FORMAT_VERSION = 1


class IndexError_(KbError):
    """The index cannot be used as it is; the message says what to run."""


@dataclass
class LoadedIndex:
    directory: Path
    manifest: dict
    entries: list[Entry]
    vectors: VectorIndex
    lexical: LexicalIndex

    @cached_property
    def by_id(self) -> dict[str, int]:
        return {e.id: i for i, e in enumerate(self.entries)}


def read_manifest(directory: Path) -> dict | None:
    path = directory / "manifest.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise IndexError_(
            f"{path} is unreadable ({e}); rebuild it with `kb ingest PATH --index {directory}`"
        ) from e


def load(directory: Path, embedder: str | None = None) -> LoadedIndex:
    """The live generation; `embedder` is the id of the embedder that will query it (checked
    against the one that built it), None to skip the check."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        raise IndexError_(f"no index at {directory}; build one with `kb ingest PATH --index {directory}`")
    if manifest.get("format") != FORMAT_VERSION:
        raise IndexError_(
            f"index at {directory} has format {manifest.get('format')}, this kb reads {FORMAT_VERSION}; "
            f"rebuild it with `kb ingest --index {directory}`"
        )
    if embedder is not None:
        want = embedder
        have = manifest.get("embedder", {}).get("id")
        if want != have:
            raise IndexError_(
                f"index at {directory} was built with embedder {have!r} but {want!r} is configured; "
                f"rebuild it with `kb ingest --index {directory}` or configure embedder {have!r}"
            )
    gen = directory / manifest["generation"]
    try:
        entries = [
            Entry.from_dict(json.loads(line))
            for line in (gen / "entries.jsonl").read_text("utf-8").splitlines()
            if line.strip()
        ]
        rows = json.loads((gen / "rows.json").read_text("utf-8"))
        store = VectorStore.load(gen / "faiss.index")
        bm25 = Bm25.load(gen)
    except Exception as e:
        raise IndexError_(
            f"index at {directory} is damaged ({type(e).__name__}: {e}); rebuild it with `kb ingest --index {directory}`"
        ) from e
    if store.size != len(rows["entry"]) or bm25.size != len(entries):
        raise IndexError_(
            f"index at {directory} is inconsistent; rebuild it with `kb ingest --index {directory}`"
        )
    return LoadedIndex(
        directory=directory,
        manifest=manifest,
        entries=entries,
        vectors=FaissVectors(store, np.asarray(rows["entry"], dtype=np.int64), rows["kind"]),
        lexical=bm25,
    )


def _vectors_file(loaded: LoadedIndex) -> np.ndarray:
    return np.load(loaded.directory / loaded.manifest["generation"] / "vectors.npy", mmap_mode="r")


def subset(loaded: LoadedIndex, langs: set[str]) -> LoadedIndex:
    """The index restricted to some languages, as if only their documents had been ingested:
    vectors reused (an exact index of the kept rows), BM25 statistics recomputed, links to
    dropped entries cleared. `kb eval` runs the single-language gold sets against it."""
    keep = [i for i, e in enumerate(loaded.entries) if e.lang in langs]
    if len(keep) == len(loaded.entries):
        return loaded
    kept_ids = {loaded.entries[i].id for i in keep}
    entries = [
        replace(e, translation=e.translation if e.translation in kept_ids else None)
        for e in (loaded.entries[i] for i in keep)
    ]
    new_pos = {old: new for new, old in enumerate(keep)}
    assert isinstance(loaded.vectors, FaissVectors)
    row_entry, row_kind = loaded.vectors.row_entries, loaded.vectors.row_kinds
    rows = [r for r, e in enumerate(row_entry) if int(e) in new_pos]
    vectors = FaissVectors(
        VectorStore.build(np.asarray(_vectors_file(loaded)[rows])),
        np.asarray([new_pos[int(row_entry[r])] for r in rows], dtype=np.int64),
        [row_kind[r] for r in rows],
    )
    manifest = dict(loaded.manifest, counts={"entries": len(entries), "langs": sorted(langs)})
    lexical = Bm25.build([lexical_tokens(e) for e in entries])
    return LoadedIndex(loaded.directory, manifest, entries, vectors, lexical)


def exact_vectors(loaded: LoadedIndex) -> FaissVectors:
    """The same rows in an exact (flat) index: what an approximate index's recall is measured
    against (eval/bench.py)."""
    assert isinstance(loaded.vectors, FaissVectors)
    return FaissVectors(
        VectorStore.exact(np.asarray(_vectors_file(loaded))),
        loaded.vectors.row_entries,
        loaded.vectors.row_kinds,
    )
