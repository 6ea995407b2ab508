"""Building an index generation: embed what changed, link translations, BM25, FAISS, write.

A build writes a new generation folder completely, then replaces manifest.json with one
os.replace (atomic on POSIX). A build killed midway leaves the old manifest pointing at the old,
complete generation; the next build removes the debris. Vectors of unchanged texts are copied
from the previous generation (keyed by a hash of the embedded text), so re-ingesting after an
edit embeds only what changed. The layout is index/store.py's.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ingest.entry import Entry

from .lexical import Bm25
from .seams import Embedder
from .store import FORMAT_VERSION, IndexError_, read_manifest
from .vectors import VectorStore
from .views import dense_views, lexical_tokens

Progress = Callable[[str, int, int], None]  # (stage, done, total)
Link = Callable[[list[Entry], Callable[[list[str]], np.ndarray]], list[Entry]]


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:20]


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

    def stages(self) -> dict[str, float]:
        """Seconds per stage; "prepare" is the rest (entry views, text keys, the row matrix)."""
        known = self.seconds_embed + self.seconds_link + self.seconds_lexical + self.seconds_vectors
        return {
            "prepare": self.seconds_total - known - self.seconds_write,
            "embed": self.seconds_embed,
            "link": self.seconds_link,
            "bm25": self.seconds_lexical,
            "vectors": self.seconds_vectors,
            "write": self.seconds_write,
        }


@contextmanager
def build_lock(directory: Path, wait: bool = True) -> Iterator[None]:
    """One build at a time per index directory; a second `kb ingest` waits (or refuses)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as e:
            raise IndexError_(f"another `kb ingest` is building {directory}; try again when it ends") from e
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _previous_vectors(
    directory: Path, manifest: dict | None, emb_id: str
) -> tuple[dict[str, int], np.ndarray]:
    """The live generation's vectors (memory-mapped) and text hash -> row, if made by the same
    embedder; else nothing."""
    nothing: tuple[dict[str, int], np.ndarray] = ({}, np.zeros((0, 0), dtype=np.float32))
    if not manifest or manifest.get("embedder", {}).get("id") != emb_id:
        return nothing
    try:
        gen = directory / manifest["generation"]
        keys = json.loads((gen / "rows.json").read_text("utf-8"))["keys"]
        vecs = np.load(gen / "vectors.npy", mmap_mode="r")
    except (OSError, ValueError, KeyError):
        return nothing
    if len(keys) != len(vecs):
        return nothing
    return {k: i for i, k in enumerate(keys)}, vecs


def _gather(keys: list[str], sources: list[tuple[dict[str, int], np.ndarray]], dim: int) -> np.ndarray:
    """The row matrix, copied in bulk from each (text hash -> row, vectors) source; copying
    row by row through a dict of row views cost ~5 s at 100k entries."""
    out = np.zeros((len(keys), dim), dtype=np.float32)
    for where, vecs in sources:
        if where:
            src = np.fromiter((where.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
            hit = src >= 0
            out[hit] = vecs[src[hit]]
    return out


def _lexical_keys(entries: list[Entry]) -> list[str]:
    """A key per entry for reusing its BM25 term counts: every field of the entry, plus the
    code that turns entries into tokens (any change to index/ or ingest/, or to jieba, gives
    new keys, so tokens are never reused across a tokenizer change)."""
    from dataclasses import fields

    import ingest

    h = hashlib.sha1()
    for folder in (Path(__file__).parent, Path(ingest.__file__).parent):
        for f in sorted(folder.glob("*.py")):
            h.update(f.name.encode() + f.read_bytes())
    try:
        from importlib.metadata import version

        h.update(version("jieba").encode())
    except Exception:  # pragma: no cover - jieba is a dependency
        pass
    code = h.hexdigest()
    names = [f.name for f in fields(Entry)]
    return [
        hashlib.sha1(
            (code + repr(tuple(getattr(e, n) for n in names))).encode("utf-8", "surrogatepass")
        ).hexdigest()[:20]
        for e in entries
    ]


def _build_lexical(directory: Path, manifest: dict | None, entries: list[Entry]) -> Bm25:
    """BM25 of the entries; the term counts of entries unchanged since the live generation are
    copied from it rather than tokenized again (jieba makes tokenizing the slow part)."""
    keys = _lexical_keys(entries)
    previous = None
    if manifest:
        try:
            previous = Bm25.load(directory / manifest["generation"], counts=True)
        except Exception:  # no reusable counts (older index, damaged files): tokenize everything
            previous = None
    known = previous.key_rows() if previous is not None else {}
    docs = [None if k in known else lexical_tokens(e) for e, k in zip(entries, keys, strict=True)]
    return Bm25.build(docs, keys=keys, previous=previous if known else None)


@dataclass(frozen=True)
class VectorOptions:
    """How the vector index is built (the `vector_index` and `index_threads` settings)."""

    kind: str = "auto"  # "auto", "flat" or "ivf" (index/vectors.py)
    threads: int = 0  # threads for building an IVF index; 0: up to 2


@dataclass
class _Rows:
    """The texts a build embeds, one row each, and their vectors once gathered."""

    rows: list[tuple[int, str, str]]  # (entry index, kind, text)
    keys: list[str]  # text hash per row
    todo: list[tuple[str, str]]  # (key, text) not in the previous generation
    vectors: np.ndarray
    vector_of: Callable[[str], np.ndarray]
    seconds_embed: float


def _embed_rows(entries, embedder: Embedder, previous, progress: Progress | None) -> _Rows:
    prev_where, prev_vecs = previous
    rows = [(i, kind, text) for i, e in enumerate(entries) for kind, text in dense_views(e)]
    keys = [text_key(t) for _, _, t in rows]
    todo = sorted({k: t for k, (_, _, t) in zip(keys, rows, strict=True) if k not in prev_where}.items())
    t_embed = time.perf_counter()
    dim = embedder.dim
    fresh_where: dict[str, int] = {}
    fresh = np.zeros((0, dim), dtype=np.float32)
    if todo:
        if progress:
            progress("embed", 0, len(todo))
        fresh = embedder.embed_documents(
            [t for _, t in todo], progress=(lambda d, n: progress("embed", d, n)) if progress else None
        )
        fresh_where = {k: i for i, (k, _) in enumerate(todo)}
    seconds_embed = time.perf_counter() - t_embed
    vectors = _gather(keys, [(prev_where, prev_vecs), (fresh_where, fresh)], dim)

    def vector_of(key: str) -> np.ndarray:
        i = fresh_where.get(key)
        return fresh[i] if i is not None else prev_vecs[prev_where[key]]

    return _Rows(rows, keys, todo, vectors, vector_of, seconds_embed)


def _link(entries: list[Entry], link: Link | None, rows: _Rows, dim: int) -> list[Entry]:
    if link is None:
        return entries

    # Linking compares question titles across languages; their vectors are rows already.
    def title_vectors(texts: list[str]) -> np.ndarray:
        return np.stack([rows.vector_of(text_key(t)) for t in texts]) if texts else np.zeros((0, dim))

    return link(entries, title_vectors)


def _manifest(gen_name, embedder: Embedder, entries, rows: _Rows, sources, problems, warnings) -> dict:
    return {
        "format": FORMAT_VERSION,
        "generation": gen_name,
        "embedder": {"id": embedder.id, "dim": embedder.dim},
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sources": sources,
        "counts": {
            "entries": len(entries),
            "rows": len(rows.rows),
            "zh": sum(e.lang == "zh" for e in entries),
            "en": sum(e.lang == "en" for e in entries),
            "linked": sum(e.translation is not None for e in entries),
        },
        "problems": problems or [],  # files skipped
        "warnings": warnings or [],  # files indexed with a caveat (an unclosed fence, ...)
        "entries": {e.id: e.content_hash for e in entries},
    }


def _write_generation(
    directory: Path, gen_name: str, manifest: dict, entries, rows: _Rows, bm25, store
) -> None:
    """The generation folder, then the manifest that makes it live; on any failure the old
    generation stays live and what this build wrote is removed (a full disk is named as such)."""
    gen = directory / gen_name
    tmp = directory / (gen_name + ".partial")
    try:
        tmp.mkdir(parents=True)
        with open(tmp / "entries.jsonl", "w", encoding="utf-8") as fh:
            for e in entries:
                fh.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
        (tmp / "rows.json").write_text(
            json.dumps(
                {"entry": [r[0] for r in rows.rows], "kind": [r[1] for r in rows.rows], "keys": rows.keys}
            ),
            "utf-8",
        )
        np.save(tmp / "vectors.npy", rows.vectors)
        store.save(tmp / "faiss.index")
        bm25.save(tmp)
        _fsync_dir(tmp)
        os.replace(tmp, gen)

        tmp_manifest = directory / "manifest.json.partial"
        tmp_manifest.write_text(json.dumps(manifest, ensure_ascii=False, indent=1), "utf-8")
        with open(tmp_manifest, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_manifest, directory / "manifest.json")
    except BaseException as e:
        # Disk full, a permission error, Ctrl+C: the old generation stays live; remove what this
        # build wrote so a full disk is not left fuller (a SIGKILL's debris goes at the next build).
        full = _disk_full(e, directory, _needed_bytes(entries, rows.vectors))
        _discard(directory, gen_name)
        if full is not None:
            raise full from e
        raise


def build(
    directory: Path,
    entries: list[Entry],
    embedder: Embedder,
    sources: list[str],
    problems: list[str] | None = None,
    progress: Progress | None = None,
    link: Link | None = None,
    warnings: list[str] | None = None,
    vector_options: VectorOptions = VectorOptions(),
) -> BuildStats:
    t0 = time.perf_counter()
    directory = Path(directory)
    with build_lock(directory):
        try:
            old = read_manifest(directory)
        except IndexError_:  # a damaged manifest is what this build replaces: nothing to reuse
            old = None
        rows = _embed_rows(entries, embedder, _previous_vectors(directory, old, embedder.id), progress)
        t_link = time.perf_counter()
        entries = _link(entries, link, rows, embedder.dim)
        t_lexical = time.perf_counter()
        if progress:
            progress("index", 0, 2)
        bm25 = _build_lexical(directory, old, entries)
        t_vectors = time.perf_counter()
        store = VectorStore.build(rows.vectors, vector_options.kind, vector_options.threads)
        t_write = time.perf_counter()
        if progress:
            progress("index", 1, 2)
        # The random part keeps two builds in one second of one process (a server's rebuild, a
        # test) from colliding with the generation that is live.
        gen_name = f"gen-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
        manifest = _manifest(gen_name, embedder, entries, rows, sources, problems, warnings)
        _write_generation(directory, gen_name, manifest, entries, rows, bm25, store)
        _fsync_dir(directory)
        _remove_stale(directory, keep=gen_name)
        t_end = time.perf_counter()
        if progress:
            progress("index", 2, 2)
        return BuildStats(
            entries=len(entries),
            rows=len(rows.rows),
            embedded=len(rows.todo),
            reused=len(set(rows.keys)) - len(rows.todo),
            seconds_embed=rows.seconds_embed,
            seconds_total=t_end - t0,
            seconds_link=t_lexical - t_link,
            seconds_lexical=t_vectors - t_lexical,
            seconds_vectors=t_write - t_vectors,
            seconds_write=t_end - t_write,
        )


def _needed_bytes(entries: list[Entry], vectors: np.ndarray) -> int:
    """About what a generation takes on disk: the vectors twice (vectors.npy and faiss.index),
    the entries' text as JSON and its BM25 terms, and some slack."""
    text = sum(len(e.body) + len(e.title) + len(e.doc) for e in entries)
    return 2 * vectors.nbytes + 4 * text + (1 << 20)


def _disk_full(error: BaseException, directory: Path, needed: int) -> OSError | None:
    """A write that failed because the disk is full, as an error that says so, where, and how
    much is needed. numpy says only "N requested and M written" and faiss "fwrite ... failed"
    (no errno), so a failed write on a disk with less free space than the index needs counts too."""
    if not isinstance(error, OSError | RuntimeError):
        return None
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    code = getattr(error, "errno", None)
    if code not in (errno.ENOSPC, errno.EDQUOT) and (code is not None or free >= needed):
        return None
    mib = 1 << 20
    return OSError(
        errno.ENOSPC,
        f"No space left on device: the disk holding {directory} is full ({free / mib:.1f} MiB free; "
        f"this index needs about {needed / mib:.1f} MiB). Free some space there, or build elsewhere "
        f"with --index, and run kb ingest again (the previous index is unchanged)",
    )


def _fsync_dir(path: Path) -> None:
    for f in path.iterdir() if path.is_dir() else ():
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(directory: Path, gen_name: str) -> None:
    try:
        live = (read_manifest(directory) or {}).get("generation")
    except IndexError_:
        live = None
    if live != gen_name:
        shutil.rmtree(directory / gen_name, ignore_errors=True)
    shutil.rmtree(directory / (gen_name + ".partial"), ignore_errors=True)
    (directory / "manifest.json.partial").unlink(missing_ok=True)


def _remove_stale(directory: Path, keep: str) -> None:
    """Old generations and debris of killed builds. A reader that opened the old generation
    keeps its memory maps; files are only unlinked."""
    for p in directory.iterdir():
        if p.name.startswith("gen-") and p.name != keep and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
