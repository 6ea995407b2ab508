"""Milvus behind the vector and lexical seams (index/seams.py): opening a live generation.

A generation is three collections named `<name>_g<stamp>_...`: `_rows` (one dense row per
entry view: row, entry position, kind, text hash, vector; exact IP search), `_entries` (one row
per entry: position, id, language, and a BM25 field computed by Milvus from our own tokens) and
`_meta` (the manifest, and what index/store.py's files hold beside the vectors: the entries
table, the per-entry facts, our vocabulary's terms and idf and each entry's terms; chunked). The alias `<name>`
names the live `_meta` collection: switching it is one call, so a reader sees one generation or
the next, never half of one. Entries and rows are separate collections because a BM25 field over
rows would count every entry once per view in its document statistics.

Tokens reach Milvus space-joined and encoded to `[a-z0-9]` words (`encode`), so that any
analyzer keeps them whole: Milvus Lite 3.2 has no `whitespace` tokenizer (only `standard` and
`jieba`: measured, "unknown tokenizer type"), and the `chinese`/`standard` analyzers split or drop
tokens such as `NCCL_SOCKET_IFNAME` or `libhccl.so`. Which tokens exist is ours (index/text.py);
Milvus only counts them. The features' idf comes from our vocabulary (the same numbers as the
FAISS store), and so do the entries' facts and terms (index/facts.py: computed at build, read at
search), so the features and the no-match gate are the same code over both stores; the BM25 scores come from Milvus (same formula, k1=1.2, b=0.75; Milvus weighs a
repeated query term by its count, so a term seen c times is sent round(1 + ln c) times, our
weight). Milvus Lite keeps BM25 statistics per segment (a limit of Milvus Lite, not ours): a collection written in one
batch is one segment here, a server merges them.

pymilvus is imported inside functions: the FAISS default never loads it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .entries import EntryTable
from .facts import FactsTable
from .lexical import Bm25
from .seams import VectorHits
from .store import FORMAT_VERSION, IndexError_, LoadedIndex

LEXICAL_DEPTH = 1000  # entries asked of the BM25 leg (the rest score 0, as far as features go)
CHUNK = 60000  # characters per meta row (a VARCHAR holds at most 65535 bytes)
_PLAIN = re.compile(r"[a-z0-9]{1,24}")


@dataclass(frozen=True)
class MilvusOptions:
    """Where the index lives: `uri` is a Milvus Lite folder (`./kb.db`) or a server
    (`http://host:19530`); `token` the server's credentials ("user:password" or an API key);
    `name` the alias of the live generation (and the prefix of its collections)."""

    uri: str
    token: str = ""
    name: str = "kb"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,100}", self.name):
            raise IndexError_(f"a Milvus index name is letters, digits and _, not {self.name!r}")

    @property
    def lite(self) -> bool:
        return "://" not in self.uri

    @property
    def label(self) -> str:
        return f"milvus:{self.uri}#{self.name}"


def encode(token: str) -> str:
    """A token as one `[a-z0-9]` word: itself when it is one already, else a hash of it."""
    if _PLAIN.fullmatch(token):
        return token
    return "x" + hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


_CLIENTS: dict[tuple[str, str], object] = {}  # one client per endpoint per process


def connect(options: MilvusOptions):
    """A client (one per endpoint, shared: a server polls for a new generation every few seconds);
    a Milvus Lite folder that another process holds is refused with a clear message."""
    key = (options.uri, options.token)
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS.setdefault(key, _connect(options))
    return client


def _connect(options: MilvusOptions):
    from pymilvus import MilvusClient

    if options.lite:
        Path(options.uri).parent.mkdir(parents=True, exist_ok=True)
    try:
        return MilvusClient(uri=options.uri, token=options.token)
    except Exception as e:
        if options.lite and _locked_elsewhere(Path(options.uri)):
            raise IndexError_(
                f"{options.uri} is open in another process: Milvus Lite allows one process per "
                f"database file. Stop the other `kb` (or build first, then serve), or use a Milvus "
                f"server (store uri = http://host:19530; docs/scale.md)"
            ) from e
        raise IndexError_(f"cannot reach Milvus at {options.uri}: {e}") from e


def _locked_elsewhere(folder: Path) -> bool:
    import fcntl
    import os

    lock = folder / "LOCK"
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


# ---- the generation's blobs ------------------------------------------------------------------
def pack_bytes(data: bytes) -> list[str]:
    raw = base64.b64encode(zlib.compress(data, 3)).decode()
    return [raw[i : i + CHUNK] for i in range(0, len(raw), CHUNK)] or [""]


def unpack_bytes(parts: list[str]) -> bytes:
    return zlib.decompress(base64.b64decode("".join(parts)))


def pack(obj) -> list[str]:
    return pack_bytes(json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def unpack(parts: list[str]):
    return json.loads(unpack_bytes(parts).decode("utf-8"))


def tables_blob(entries: EntryTable, facts: FactsTable, bm25: Bm25) -> bytes:
    """What a search reads beside the vectors and BM25 scores, as one .npz: the entries table
    (index/entries.py), the facts (index/facts.py), the vocabulary with its idf and each entry's
    terms (index/lexical.py's rows)."""
    out = io.BytesIO()
    np.savez(
        out,
        entries=np.frombuffer(entries.blob, dtype=np.uint8),
        offsets=entries.offsets,
        ids=np.array(entries.ids, dtype=str),
        langs=np.array(entries.langs, dtype=str),
        partner=entries.partner.astype(np.int32),
        facts=np.frombuffer(facts.blob, dtype=np.uint8),
        facts_offsets=facts.offsets,
        terms=np.array(bm25.terms, dtype=str),
        idf=bm25.idf_arr,
        doc_ptr=bm25.rows.doc_ptr,
        doc_terms=bm25.rows.doc_terms,
    )
    return out.getvalue()


def live_collection(client, name: str) -> str | None:
    """The `_meta` collection the alias names, None when there is no index yet."""
    try:
        if name not in client.list_aliases().get("aliases", []):
            return None
        return client.describe_alias(name)["collection_name"]
    except Exception:
        return None


def generation_of(meta_collection: str) -> str:
    return meta_collection.removesuffix("_meta")


def blob_rows(blobs: dict[str, list[str]]) -> list[dict]:
    """The meta rows of a generation's blobs: blob k's chunks are parts k << 32, k << 32 + 1, ..."""
    return [
        {"part": (k << 32) + i, "name": name, "data": chunk, "dummy": [0.0, 0.0]}
        for k, (name, chunks) in enumerate(blobs.items())
        for i, chunk in enumerate(chunks)
    ]


def read_parts(client, meta_collection: str, blob: int) -> list[str]:
    """The chunks of the generation's blob number `blob` (0: the manifest), in order."""
    # 100 chunks of 60,000 characters a query: far below gRPC's 64 MB message limit.
    rows = _query_all(client, meta_collection, ["part", "data"], "part", 100, blob << 32)
    return [r["data"] for r in sorted(rows, key=lambda r: int(r["part"]))]


def read_manifest(client, meta_collection: str) -> dict:
    """The generation's manifest; {} when it is unreadable (one of an older kb: rebuild)."""
    try:
        parts = read_parts(client, meta_collection, 0)
        return unpack(parts) if parts else {}
    except Exception:
        return {}


def _query_all(
    client, collection: str, fields: list[str], key: str, window: int = 1000, start: int = 0
) -> list[dict]:
    """Every row from `start` on, by windows of the primary key (start, start + 1, ... as the
    builder numbers them): a query is limited to 16384 rows, and pymilvus' query_iterator needs
    a call Lite lacks."""
    out: list[dict] = []
    while True:
        batch = client.query(
            collection, filter=f"{key} >= {start} and {key} < {start + window}", output_fields=fields
        )
        if not batch:
            return out
        out.extend(batch)
        start += window


def read_vectors(client, generation: str, dim: int) -> tuple[list[str], np.ndarray]:
    """The text hash and vector of every row of a generation (what a rebuild reuses)."""
    rows = _query_all(client, f"{generation}_rows", ["row", "key", "vector"], "row")
    rows.sort(key=lambda r: int(r["row"]))
    vecs = np.asarray([r["vector"] for r in rows], dtype=np.float32).reshape(len(rows), dim)
    return [r["key"] for r in rows], vecs


# ---- the seams -------------------------------------------------------------------------------
class MilvusVectors:
    """VectorIndex: the nearest rows of each query vector, with their entry and kind."""

    def __init__(self, client, collection: str, size: int) -> None:
        self.client = client
        self.collection = collection
        self._size = size

    @property
    def size(self) -> int:
        return self._size

    @property
    def kind(self) -> str:
        return "milvus-flat"

    def search(self, queries: np.ndarray, depth: int) -> VectorHits:
        n = len(queries)
        k = max(1, min(depth, self._size, 16384))
        scores = np.full((n, depth), -1.0, dtype=np.float32)
        entries = np.full((n, depth), -1, dtype=np.int64)
        kinds = np.full((n, depth), "", dtype=object)
        if n and self._size:
            res = self.client.search(
                self.collection,
                data=np.asarray(queries, dtype=np.float32).tolist(),
                anns_field="vector",
                limit=k,
                output_fields=["entry", "kind"],
                search_params={"metric_type": "IP"},
            )
            for q, hits in enumerate(res):
                for j, h in enumerate(hits):
                    scores[q, j] = h["distance"]
                    entries[q, j] = h["entity"]["entry"]
                    kinds[q, j] = h["entity"]["kind"]
        return VectorHits(scores, entries, kinds)


class MilvusLexical:
    """LexicalIndex: BM25 scores from Milvus' BM25 field; the vocabulary (which tokens exist and
    their idf, what the features weigh) and each entry's terms (its facts' tokens) from our own,
    stored with the generation."""

    def __init__(
        self, client, collection: str, terms: list[str], idf: np.ndarray, doc_ptr, doc_terms
    ) -> None:
        self.client = client
        self.collection = collection
        self.n_docs = len(doc_ptr) - 1
        self._terms = terms
        self._idf = {t: float(v) for t, v in zip(terms, idf.tolist(), strict=True)}
        self._max_idf = float(idf.max()) if len(idf) else 1.0
        self._doc_ptr = doc_ptr
        self._doc_terms = doc_terms

    def doc_terms(self, i: int) -> list[str]:
        """The distinct terms of entry i (index/lexical.py `Bm25.doc_terms`)."""
        ids = self._doc_terms[int(self._doc_ptr[i]) : int(self._doc_ptr[i + 1])]
        return [self._terms[j] for j in ids.tolist()]

    @property
    def size(self) -> int:
        return self.n_docs

    @property
    def max_idf(self) -> float:
        return self._max_idf

    def idf(self, token: str) -> float | None:
        return self._idf.get(token)

    def __contains__(self, token: object) -> bool:
        return token in self._idf

    def _search(self, texts: list[str], limit: int) -> list:
        return self.client.search(
            self.collection,
            data=texts,
            anns_field="sparse",
            limit=limit,
            output_fields=["pos"],
            search_params={"metric_type": "BM25"},
        )

    def scores(self, tokens: Sequence[str]) -> tuple[np.ndarray, float]:
        out = np.zeros(self.n_docs, dtype=np.float32)
        counts = Counter(t for t in tokens if t in self._idf)
        if not counts or not self.n_docs:
            return out, 0.0
        terms = [" ".join([encode(t)] * max(1, round(1 + math.log(c)))) for t, c in counts.items()]
        # Milvus Lite answers BM25 with distance = -score, a server with the score.
        for h in self._search([" ".join(terms)], min(LEXICAL_DEPTH, self.n_docs))[0]:
            out[int(h["entity"]["pos"])] = abs(float(h["distance"]))
        # The most any entry could score: each term's best entry, summed.
        best = sum(abs(float(hits[0]["distance"])) for hits in self._search(terms, 1) if hits)
        return out, best


def load(options: MilvusOptions, embedder: str | None = None, client=None) -> LoadedIndex:
    """The live generation behind the alias; `embedder` is checked like index/store.py `load`."""
    client = client or connect(options)
    meta = live_collection(client, options.name)
    if meta is None:
        raise IndexError_(f"no index at {options.label}; build one with `kb ingest PATH`")
    gen = generation_of(meta)
    try:
        for suffix in ("_meta", "_rows", "_entries"):  # a reopened Milvus Lite folder starts released
            client.load_collection(gen + suffix)
        manifest = read_manifest(client, meta)
    except Exception as e:
        raise IndexError_(f"index at {options.label} is unreadable ({e}); rebuild it with `kb ingest`") from e
    if manifest.get("format") != FORMAT_VERSION:
        raise IndexError_(
            f"index at {options.label} has format {manifest.get('format')}, this kb reads "
            f"{FORMAT_VERSION}; rebuild it with `kb ingest`"
        )
    have = manifest.get("embedder", {}).get("id")
    if embedder is not None and embedder != have:
        raise IndexError_(
            f"index at {options.label} was built with embedder {have!r} but {embedder!r} is "
            f"configured; rebuild it with `kb ingest` or configure embedder {have!r}"
        )
    try:
        with np.load(io.BytesIO(unpack_bytes(read_parts(client, meta, 1)))) as z:
            t = {k: z[k] for k in z.files}
        entries = EntryTable(
            t["entries"].tobytes(), t["offsets"], t["ids"].tolist(), t["langs"].tolist(), t["partner"]
        )
        facts = FactsTable(t["facts"].tobytes(), t["facts_offsets"])
    except Exception as e:
        raise IndexError_(f"index at {options.label} is damaged ({e}); rebuild it with `kb ingest`") from e
    vectors = MilvusVectors(client, f"{gen}_rows", int(manifest["counts"]["rows"]))
    lexical = MilvusLexical(
        client, f"{gen}_entries", t["terms"].tolist(), t["idf"], t["doc_ptr"], t["doc_terms"]
    )
    if lexical.n_docs != len(entries) or len(facts) != len(entries):
        raise IndexError_(f"index at {options.label} is inconsistent; rebuild it with `kb ingest`")
    return LoadedIndex(Path(options.label), manifest, entries, vectors, lexical, facts)
