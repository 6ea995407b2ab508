"""What a rebuild reuses of the live generation: unchanged files' entries, terms and facts
(copied as they are), its vector segments, and any vector by the hash of its text.

The unit of reuse is a source file: `files.json` records, per file, the hash of its bytes,
where its entries are and what was wrong with it. A file whose bytes, path and parser are the
same is not read into entries again (ingest/collect.py asks `unchanged`), and everything derived
from its entries is copied from the previous generation by position. "Parser" is CODE_KEY: the
code of ingest/ and index/ and the segmenter, plus the caller's parse limits; a new kb version
re-derives everything once (vectors are still reused by text, as long as the embedder is the same).

An index of an older format is read only for its vectors, so upgrading does not embed the
knowledge base again: format 1 kept them in rows.json and vectors.npy, format 2 in the segments
of format 3 and 4 (3 added the topic profiles to the facts: index/topics.py; 4 added English
stems to the terms: index/text.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from .entries import EntryTable
from .facts import FactsTable
from .lexical import Bm25
from .segments import KEY_BYTES, PreviousVectors, Rows
from .text import TOKENIZER

FIRST_SEGMENTED_FORMAT = 2  # from this format on, vectors are in segments (index/segments.py)


@lru_cache(maxsize=1)
def code_key() -> str:
    """Changes with any code that shapes what a build derives from a file (see the docstring)."""
    import ingest

    h = hashlib.sha1(TOKENIZER.encode())
    for folder in (Path(__file__).parent, Path(ingest.__file__).parent):
        for f in sorted(folder.glob("*.py")):
            h.update(f.name.encode() + f.read_bytes())
    try:
        from importlib.metadata import version

        h.update(version("rjieba").encode())
    except Exception:  # pragma: no cover - rjieba is a dependency
        pass
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class FileRecord:
    """One source file of a generation."""

    doc: str
    digest: str  # sha1 of its bytes
    start: int  # its entries are start..start+count-1
    count: int
    problems: list[tuple[str, bool]] = field(default_factory=list)  # (reason, skipped) found in its text

    def to_json(self) -> list:
        return [self.doc, self.digest, self.start, self.count, [list(p) for p in self.problems]]

    @classmethod
    def from_json(cls, row: list) -> FileRecord:
        return cls(row[0], row[1], int(row[2]), int(row[3]), [(str(r), bool(s)) for r, s in row[4]])


def write_files(tmp: Path, key: str, files: list[FileRecord], groups: list[list[str]]) -> None:
    (tmp / "files.json").write_text(
        json.dumps({"key": key, "files": [f.to_json() for f in files], "groups": groups}, ensure_ascii=False),
        "utf-8",
    )


class Previous:
    """The live generation, opened for a rebuild: cheap until a part is asked for."""

    def __init__(self, directory: Path, manifest: dict, key: str) -> None:
        from .store import FORMAT_VERSION

        self.gen = directory / manifest["generation"]
        self.format = manifest.get("format")
        self.segmented = (
            isinstance(self.format, int) and FIRST_SEGMENTED_FORMAT <= self.format <= FORMAT_VERSION
        )
        self.files: dict[str, FileRecord] = {}
        self.groups: set[frozenset[str]] = set()
        if self.format == FORMAT_VERSION:
            try:
                table = json.loads((self.gen / "files.json").read_text("utf-8"))
            except (OSError, ValueError):
                table = {}
            if table.get("key") == key:
                self.files = {r.doc: r for r in map(FileRecord.from_json, table["files"])}
                self.groups = {frozenset(g) for g in table.get("groups", [])}

    def unchanged(self, doc: str, digest: str) -> tuple[int, list[tuple[str, bool]]] | None:
        """The entry count and problems recorded for a file whose bytes have not changed; None:
        read it again."""
        r = self.files.get(doc)
        return (r.count, list(r.problems)) if r is not None and r.digest == digest else None

    @cached_property
    def entries(self) -> EntryTable:
        return EntryTable.load(self.gen)

    @cached_property
    def bm25(self) -> Bm25:
        return Bm25.load(self.gen)

    @cached_property
    def facts(self) -> FactsTable:
        return FactsTable.load(self.gen)

    @cached_property
    def segments(self) -> PreviousVectors | None:
        return PreviousVectors.open(self.gen) if self.segmented else None

    @cached_property
    def by_text(self) -> VectorsByText | None:
        """Any vector of the generation by its text hash (dead rows too: a revert finds its
        text there)."""
        if self.segments is not None:
            return VectorsByText(self.segments.rows.key, self.segments.vectors)
        return _legacy_vectors(self.gen)


class VectorsByText:
    def __init__(self, keys: np.ndarray, vectors, ascending: bool = False) -> None:
        self.keys = keys  # S20 per row
        self.vectors = vectors  # rows -> (n, dim) float32
        # (row order, keys in it) once sorted; keys given in ascending order already are.
        self._sorted = (np.arange(len(keys)), keys) if ascending else None

    def find(self, wanted: np.ndarray) -> np.ndarray:
        """The row holding each wanted text hash, -1 where none does."""
        if not len(self.keys) or not len(wanted):
            return np.full(len(wanted), -1, dtype=np.int64)
        # Not yet sorted: a scan per key beats sorting 254k hashes for a few edits.
        if self._sorted is None and len(wanted) <= 64:
            rows = []
            for k in wanted:
                hit = np.flatnonzero(self.keys == k)
                rows.append(int(hit[0]) if len(hit) else -1)
            return np.asarray(rows, dtype=np.int64)
        if self._sorted is None:
            order = np.argsort(self.keys, kind="stable")
            self._sorted = (order, self.keys[order])
        order, keys = self._sorted
        pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        return np.where(keys[pos] == wanted, order[pos], -1).astype(np.int64)


def _legacy_vectors(gen: Path) -> VectorsByText | None:
    """Format 1: rows.json's text hashes beside vectors.npy."""
    try:
        keys = np.array(json.loads((gen / "rows.json").read_text("utf-8"))["keys"], dtype=f"S{KEY_BYTES}")
        vecs = np.load(gen / "vectors.npy", mmap_mode="r")
    except (OSError, ValueError, KeyError):
        return None
    if len(keys) != len(vecs):
        return None
    return VectorsByText(
        keys, lambda rows: np.asarray(vecs[np.asarray(rows, dtype=np.int64)], dtype=np.float32)
    )


def open_previous(directory: Path, embedder_id: str, key: str) -> Previous | None:
    """The live generation if one was built by the same embedder, else None."""
    from .store import IndexError_, read_manifest

    try:
        manifest = read_manifest(directory)
    except IndexError_:  # a damaged manifest is what this build replaces: nothing to reuse
        return None
    if not manifest or manifest.get("embedder", {}).get("id") != embedder_id or "generation" not in manifest:
        return None
    previous = Previous(directory, manifest, key)
    if previous.files:
        # What unchanged files copy (their entries, terms, facts and vector rows): a damaged part
        # means reading every file again (and, without the vectors, embedding them again).
        try:
            n = len(previous.entries)
            if previous.bm25.n_docs != n or len(previous.facts) != n or previous.segments is None:
                raise ValueError("a part is missing or of another length")
        except Exception:
            previous.files, previous.groups = {}, set()
    return previous


__all__ = ["FileRecord", "Previous", "Rows", "VectorsByText", "code_key", "open_previous", "write_files"]


def file_changes(previous: Previous | None, sources, replaced: bool = False) -> dict[str, list[str]]:
    """The documents a rebuild found new, changed or gone since the live generation (what `kb
    ingest` names); empty when there is nothing to compare with (no index yet, or another kb
    version that re-reads everything). `replaced`: the build was given other folders than the
    index held. Documents are named relative to their folder, so `zh/gloo.md` then `en/gloo.md`
    were both `gloo.md`, reported as "changed": every old one is gone and every new one is new."""
    if previous is None or not previous.files:
        return {}
    now = {s.doc: s.digest for s in sources}
    old = previous.files
    if replaced:
        return {"added": sorted(now), "changed": [], "removed": sorted(old)}
    return {
        "added": sorted(d for d in now if d not in old),
        "changed": sorted(d for d, digest in now.items() if d in old and old[d].digest != digest),
        "removed": sorted(d for d in old if d not in now),
    }
