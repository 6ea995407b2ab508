"""A new generation's entries, in source order: runs copied from the previous generation (for
files that did not change) and runs of newly parsed entries; then their translation links.

Links (ingest/link.py) are made within groups of documents (a zh/en pair, and everything that is
in no pair); a group whose documents all kept their bytes and that was the same group last time
keeps its links, the others are linked again. Linking a group only needs its entries, so an
edit decodes the entries of the edited document and its partner, not the whole index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ingest.entry import Entry

from .entries import TableWriter
from .previous import FileRecord, Previous


@dataclass
class Run:
    start: int  # new index of its first entry
    count: int
    entries: list[Entry] | None  # newly parsed, or None: copied from the previous generation
    old_start: int = -1  # where a copied run starts in the previous generation


@dataclass
class Assembly:
    runs: list[Run]
    files: list[FileRecord]
    table: TableWriter
    parsed: dict[int, Entry]  # new index -> newly parsed entry
    renumber: np.ndarray | None  # previous entry -> new index (-1: changed or gone); None: nothing reused
    reused_docs: set[str] = field(default_factory=set)

    @property
    def reused(self) -> bool:
        return self.renumber is not None

    @property
    def size(self) -> int:
        return sum(r.count for r in self.runs)


def assemble(sources, previous: Previous | None) -> Assembly:
    """sources: index/build.py Source records, in order."""
    runs: list[Run] = []
    files: list[FileRecord] = []
    reused_docs: set[str] = set()
    n = 0
    for s in sources:
        if s.entries is None:
            if previous is None or s.doc not in previous.files:
                raise ValueError(f"{s.doc} was not in the previous generation; it must be read")
            rec = previous.files[s.doc]
            last = runs[-1] if runs else None
            if last is not None and last.entries is None and last.old_start + last.count == rec.start:
                last.count += rec.count
            else:
                runs.append(Run(n, rec.count, None, rec.start))
            count = rec.count
            reused_docs.add(s.doc)
        else:
            runs.append(Run(n, len(s.entries), list(s.entries)))
            count = len(s.entries)
        files.append(FileRecord(s.doc, s.digest, n, count, list(s.problems)))
        n += count
    table, parsed = TableWriter(), dict[int, Entry]()
    renumber = np.full(len(previous.entries), -1, dtype=np.int64) if reused_docs and previous else None
    for run in runs:
        if run.entries is None:
            assert previous is not None and renumber is not None
            table.copy(previous.entries, run.old_start, run.old_start + run.count)
            renumber[run.old_start : run.old_start + run.count] = np.arange(run.start, run.start + run.count)
        else:
            table.add(run.entries)
            parsed.update(zip(range(run.start, run.start + run.count), run.entries, strict=True))
    return Assembly(runs, files, table, parsed, renumber, reused_docs)


TitleVectors = Callable[[list[str]], np.ndarray]


def link_partners(a: Assembly, previous: Previous | None, link, title_vectors: TitleVectors):
    """Each entry's translation as an entry index (-1: none), and the link groups made."""
    n = a.size
    partner = np.full(n, -1, dtype=np.int32)
    old_of = np.full(n, -1, dtype=np.int64)
    if a.renumber is not None and previous is not None:
        reused_old = np.flatnonzero(a.renumber >= 0)
        old_of[a.renumber[reused_old]] = reused_old
        p = previous.entries.partner[reused_old]
        partner[a.renumber[reused_old]] = np.where(p >= 0, a.renumber[np.maximum(p, 0)], -1)

    def entry_at(i: int) -> Entry:
        e = a.parsed.get(i)
        if e is not None:
            return e
        assert previous is not None
        return previous.entries[int(old_of[i])]

    docs = [f.doc for f in a.files]
    if link is None:  # entries keep the links they came with
        ids = {e_id: i for i, e_id in enumerate(a.table.ids)}
        for i, e in a.parsed.items():
            partner[i] = ids.get(e.translation, -1) if e.translation else -1
        return partner, []
    groups = link.groups(docs) if hasattr(link, "groups") else [docs]
    where = {f.doc: (f.start, f.count) for f in a.files}
    for group in groups:
        kept = previous is not None and frozenset(group) in previous.groups
        if kept and all(d in a.reused_docs for d in group):
            continue  # same documents, same bytes: the same links
        idx = [i for d in group for i in range(where[d][0], where[d][0] + where[d][1])]
        entries = [entry_at(i) for i in idx]
        linked = link(entries, title_vectors)
        pos = {e.id: i for e, i in zip(entries, idx, strict=True)}
        for e, i in zip(linked, idx, strict=True):
            partner[i] = pos.get(e.translation, -1) if e.translation else -1
    return partner, groups
