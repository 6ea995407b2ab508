"""A generation's entries: one JSON blob per entry, decoded only when an entry is read.

Files (index/store.py's layout): `entries.bin` holds the blobs end to end (UTF-8 JSON of
`Entry.to_dict()` without `translation`), `entries.npz` their offsets, ids, languages and each
entry's translation as the index of its partner (-1: none).

Why blobs and not one JSON line per entry: at 100k entries the entries file is 122 MB, and
decoding it costs 1.3 s (json.loads per line) plus 0.6 s (Entry objects), encoding it 3.3 s
(measured here, 2 cores under load). A search reads the 40-80 entries it ranks; a rebuild after
one edited file copies the unchanged files' blobs as bytes (index/build.py). Translations live
apart from the blobs because linking (ingest/link.py) changes them without changing an entry.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from ingest.entry import Entry


def encode(entry: Entry) -> bytes:
    d = entry.to_dict()
    del d["translation"]
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def decode(blob: bytes | memoryview, translation: str | None) -> Entry:
    try:
        d = json.loads(bytes(blob).decode("utf-8", "surrogatepass"))
        d["translation"] = translation
        return Entry.from_dict(d)
    except (ValueError, TypeError, KeyError) as e:  # entries.bin altered on disk (UnicodeDecodeError too)
        from .store import IndexError_

        raise IndexError_(
            f"an entry of the index is damaged ({type(e).__name__}); rebuild it with `kb ingest`"
        ) from e


class EntryTable(Sequence[Entry]):
    """The entries of one generation, a Sequence[Entry] that decodes an entry when it is first
    read and keeps it (bounded by the index: at most one Entry per entry)."""

    def __init__(
        self, blob: bytes, offsets: np.ndarray, ids: list[str], langs: list[str], partner: np.ndarray
    ):
        self.blob = blob
        self.offsets = offsets  # int64, len(ids) + 1
        self.ids = ids
        self.langs = langs
        self.partner = partner  # int32 entry index of the translation, -1: none
        self._decoded: dict[int, Entry] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> EntryTable:
        """A table of entries in memory (tests, language subsets)."""
        blobs = [encode(e) for e in entries]
        ids = [e.id for e in entries]
        where = {e_id: i for i, e_id in enumerate(ids)}
        partner = np.array([where.get(e.translation, -1) if e.translation else -1 for e in entries], np.int32)
        return cls(
            b"".join(blobs), _offsets([len(b) for b in blobs]), ids, [e.lang for e in entries], partner
        )

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> Entry: ...
    @overload
    def __getitem__(self, i: slice) -> list[Entry]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        e = self._decoded.get(i)
        if e is None:
            if not 0 <= i < len(self.ids):
                raise IndexError(i)
            p = int(self.partner[i])
            e = decode(self.blob_of(i), self.ids[p] if p >= 0 else None)
            with self._lock:
                self._decoded[i] = e
        return e

    def __iter__(self) -> Iterator[Entry]:
        return (self[i] for i in range(len(self)))

    def blob_of(self, i: int) -> memoryview:
        return memoryview(self.blob)[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def save(self, directory: Path) -> None:
        (directory / "entries.bin").write_bytes(self.blob)
        np.savez(
            directory / "entries.npz",
            offsets=self.offsets,
            ids=np.array(self.ids, dtype=str),
            langs=np.array(self.langs, dtype=str),
            partner=self.partner.astype(np.int32),
        )

    @classmethod
    def load(cls, directory: Path) -> EntryTable:
        """Read into memory (not mapped: see index/vectors.py on files changed under a server)."""
        with np.load(directory / "entries.npz") as z:
            offsets, ids, langs, partner = z["offsets"], z["ids"].tolist(), z["langs"].tolist(), z["partner"]
        blob = (directory / "entries.bin").read_bytes()
        if len(offsets) != len(ids) + 1 or int(offsets[-1]) != len(blob) or len(partner) != len(ids):
            raise ValueError("entries.bin does not match entries.npz")
        return cls(blob, offsets, ids, langs, partner)


def _offsets(sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


class TableWriter:
    """Assembles a new table from runs of an older table (copied as bytes) and new entries."""

    def __init__(self) -> None:
        self._parts: list[bytes | memoryview] = []
        self._sizes: list[np.ndarray] = []
        self.ids: list[str] = []
        self.langs: list[str] = []

    def copy(self, old: EntryTable, start: int, stop: int) -> None:
        a, b = int(old.offsets[start]), int(old.offsets[stop])
        self._parts.append(memoryview(old.blob)[a:b])
        self._sizes.append(np.diff(old.offsets[start : stop + 1]))
        self.ids.extend(old.ids[start:stop])
        self.langs.extend(old.langs[start:stop])

    def add(self, entries: Sequence[Entry]) -> None:
        blobs = [encode(e) for e in entries]
        self._parts.extend(blobs)
        self._sizes.append(np.array([len(b) for b in blobs], dtype=np.int64))
        self.ids.extend(e.id for e in entries)
        self.langs.extend(e.lang for e in entries)

    def finish(self, partner: np.ndarray) -> EntryTable:
        sizes = np.concatenate(self._sizes) if self._sizes else np.zeros(0, dtype=np.int64)
        return EntryTable(b"".join(self._parts), _offsets(sizes), self.ids, self.langs, partner)
