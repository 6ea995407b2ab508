"""Building a Milvus generation (index/milvus_store.py has the layout): embed what changed, link
translations, write three new collections, then switch the alias.

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

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ingest.entry import Entry

from .build import BuildStats, Link, Progress, _embed_rows, _link, _manifest
from .lexical import K1, B, Bm25
from .milvus_store import (
    MilvusOptions,
    connect,
    encode,
    generation_of,
    live_collection,
    pack,
    read_blobs,
    read_vectors,
)
from .seams import Embedder
from .store import IndexError_
from .views import lexical_tokens

BATCH = 1000  # rows per insert (a gRPC message stays far below its 64 MB limit)
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


def _insert(client, collection: str, rows: list[dict]) -> None:
    for i in range(0, len(rows), BATCH):
        client.insert(collection, rows[i : i + BATCH])


def _lexical_text(entry: Entry) -> str:
    text = " ".join(encode(t) for t in lexical_tokens(entry))
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT].rsplit(" ", 1)[0]


def write_generation(client, generation: str, manifest: dict, entries: list[Entry], rows, vectors) -> None:
    """Fill a new generation's collections; `rows` are (entry, kind, key) per vector row."""
    _create(client, generation, vectors.shape[1])
    _insert(
        client,
        f"{generation}_rows",
        [
            {"row": r, "entry": int(e), "kind": kind, "key": key, "vector": vectors[r].tolist()}
            for r, (e, kind, key) in enumerate(rows)
        ],
    )
    _insert(
        client,
        f"{generation}_entries",
        [{"pos": i, "id": e.id, "lang": e.lang, "text": _lexical_text(e)} for i, e in enumerate(entries)],
    )
    bm25 = Bm25.build([lexical_tokens(e) for e in entries])
    blobs = {
        "manifest": manifest,
        "entries": [e.to_dict() for e in entries],
        "vocab": {t: float(bm25.idf_arr[j]) for t, j in bm25.vocab.items()},
    }
    meta = [
        {"part": k, "name": name, "data": chunk, "dummy": [0.0, 0.0]}
        for k, (name, chunk) in enumerate((n, c) for n, b in blobs.items() for c in pack(b))
    ]
    _insert(client, f"{generation}_meta", meta)
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


def _previous(client, options: MilvusOptions, embedder: Embedder) -> tuple[dict | None, tuple]:
    """The live manifest, and its vectors by text hash when the same embedder made them."""
    nothing: tuple = ({}, np.zeros((0, embedder.dim), dtype=np.float32))
    meta = live_collection(client, options.name)
    if meta is None:
        return None, nothing
    try:
        manifest = read_blobs(client, meta).get("manifest")
    except Exception:
        return None, nothing
    if not manifest or manifest.get("embedder", {}).get("id") != embedder.id:
        return manifest, nothing
    keys, vecs = read_vectors(client, generation_of(meta), embedder.dim)
    return manifest, ({k: i for i, k in enumerate(keys)}, vecs)


def build(
    options: MilvusOptions,
    entries: list[Entry],
    embedder: Embedder,
    sources: list[str],
    problems: list[str] | None = None,
    progress: Progress | None = None,
    link: Link | None = None,
    warnings: list[str] | None = None,
    client=None,
) -> BuildStats:
    """index/build.py `build`, into Milvus."""
    t0 = time.perf_counter()
    with builder_lock(options):
        client = client or connect(options)
        _, previous = _previous(client, options, embedder)
        rows = _embed_rows(entries, embedder, previous, progress)
        entries = _link(entries, link, rows, embedder.dim)
        if progress:
            progress("index", 0, 1)
        generation = f"{options.name}_g{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}_{os.urandom(3).hex()}"
        manifest = _manifest(generation, embedder, entries, rows, sources, problems, warnings)
        manifest["store"] = {"backend": "milvus", "uri": options.uri, "name": options.name}
        triples = [(e, kind, key) for (e, kind, _), key in zip(rows.rows, rows.keys, strict=True)]
        try:
            write_generation(client, generation, manifest, entries, triples, rows.vectors)
        except BaseException:
            for suffix in ("_rows", "_entries", "_meta"):
                if client.has_collection(generation + suffix):
                    client.drop_collection(generation + suffix)
            raise
        switch(client, options.name, generation)
        if progress:
            progress("index", 1, 1)
        total = time.perf_counter() - t0
        return BuildStats(
            entries=len(entries),
            rows=len(rows.rows),
            embedded=len(rows.todo),
            reused=len(set(rows.keys)) - len(rows.todo),
            seconds_embed=rows.seconds_embed,
            seconds_total=total,
        )


def _faiss_rows(loaded) -> np.ndarray:
    """The vectors of a FAISS-backed LoadedIndex (a language subset has no file of its own)."""
    import faiss

    index = loaded.vectors.store._index
    if hasattr(index, "nprobe"):  # IVF: rows can be read back once it keeps a direct map
        faiss.extract_index_ivf(index).make_direct_map()
    return index.reconstruct_n(0, index.ntotal)


def publish(loaded, options: MilvusOptions):
    """The same entries and rows as a FAISS-backed LoadedIndex, as a Milvus generation (opened):
    what `kb eval` compares the two stores on. Published again only when the source changed."""
    from .milvus_store import load

    client = connect(options)
    source = f"{loaded.manifest.get('generation')}|{loaded.manifest.get('counts', {}).get('langs')}"
    meta = live_collection(client, options.name)
    if meta is not None and read_blobs(client, meta).get("manifest", {}).get("published_from") == source:
        return load(options, None, client)
    with builder_lock(options):
        generation = f"{options.name}_g{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}_{os.urandom(3).hex()}"
        manifest = dict(loaded.manifest, generation=generation, published_from=source)
        manifest["counts"] = dict(manifest.get("counts", {}), rows=loaded.vectors.size)
        kinds = loaded.vectors.row_kinds
        triples = [(int(e), kinds[r], str(r)) for r, e in enumerate(loaded.vectors.row_entries)]
        write_generation(client, generation, manifest, loaded.entries, triples, _faiss_rows(loaded))
        switch(client, options.name, generation)
    return load(options, None, client)
