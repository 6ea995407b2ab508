"""The indexes gold sets run against: built once into a cache folder and shared between sets."""

from __future__ import annotations

import hashlib
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from index.store import LoadedIndex
from kb.config import Settings
from kb.errors import KbError

from .gold import GoldSet


def cache_root(settings: Settings) -> Path:
    """The `eval_cache` setting (KB_EVAL_CACHE), else <tmp>/kb-eval-cache."""
    return Path(settings.eval_cache or Path(tempfile.gettempdir()) / "kb-eval-cache")


def _fingerprint(root: Path, embedder: str) -> str:
    """Changes when a document, the embedder's version or the code that shapes an index
    (ingest/, index/) changes."""
    import index
    import ingest
    from index.embed import embedder_id

    h = hashlib.sha1(f"{root.resolve()}|{embedder_id(embedder)}".encode())
    files = sorted(p for p in root.rglob("*") if p.is_file())
    code = sorted(Path(ingest.__file__).parent.glob("*.py")) + sorted(
        Path(index.__file__).parent.glob("*.py")
    )
    for p in [*files, *code]:
        h.update(str(p).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:20]


@contextmanager
def locked(path: Path):
    """Holds an exclusive lock on the file `path` (created if missing) for one builder at a time;
    the others wait, then reuse its work."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def cached_index(root: Path, settings: Settings, progress=None) -> Path:
    """An index of `root` in the eval cache, one folder per version of the documents and code.

    A new version starts from a copy of the newest earlier one, so only changed texts are
    embedded again; a folder is never rebuilt in place, so a test session reading it is not
    disturbed by another one building a newer version beside it. The three newest are kept.
    """
    import shutil

    from kb.indexing import ingest

    if not root.exists():
        raise KbError(f"{root} does not exist: the gold set's knowledge base is missing (or pass --index)")
    base = cache_root(settings)
    base.mkdir(parents=True, exist_ok=True)
    slug = f"{root.name}-" + hashlib.sha1(f"{root.resolve()}|{settings.embedder}".encode()).hexdigest()[:10]
    out = base / f"{slug}-{_fingerprint(root, settings.embedder)[:12]}"
    with locked(base / f"{slug}.lock"):  # one builder per KB
        if (out / "eval.done").exists():
            return out
        earlier = sorted(base.glob(f"{slug}-*/eval.done"), key=lambda f: f.stat().st_mtime)
        if earlier and not out.exists():
            shutil.copytree(earlier[-1].parent, out, ignore=shutil.ignore_patterns(".lock", "eval.done"))
        ingest([str(root)], out, settings, progress)
        (out / "eval.done").write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
        for old in [f.parent for f in earlier][:-2]:
            shutil.rmtree(old, ignore_errors=True)
    return out


def _in_milvus(loaded: LoadedIndex, label: str, settings: Settings) -> LoadedIndex:
    """The FAISS-built index copied into the configured Milvus, one alias per target."""
    from dataclasses import replace

    from index.milvus_build import publish
    from kb.indexing import store_options

    name = "eval_" + hashlib.sha1(label.encode()).hexdigest()[:12]
    return publish(loaded, replace(store_options(settings), name=name).milvus_options())


@dataclass
class Target:
    """The index a gold set (or one knowledge base of a real-post set) runs against, with what
    the baselines need to rebuild it their way."""

    loaded: LoadedIndex
    label: str
    sources: list[str]  # the KB roots it was built from
    langs: tuple[str, ...] | None


class Indexes:
    """Loads (and builds, once) the index each gold set needs; shares them between sets."""

    def __init__(self, settings: Settings, index_arg: str | None = None, progress=None) -> None:
        self.settings = settings
        self.index_arg = index_arg
        self.progress = progress
        self._loaded: dict[Path, object] = {}
        self._targets: dict[tuple, Target] = {}
        self._built: dict[Path, Path] = {}  # KB root -> its cached index (built once per run)

    def _load(self, directory: Path):
        from index.embed import embedder_id
        from index.store import IndexError_, load

        if directory not in self._loaded:
            try:
                self._loaded[directory] = load(directory, embedder_id(self.settings.embedder))
            except IndexError_ as e:
                raise KbError(str(e)) from e
        return self._loaded[directory]

    def _directory(self, kb: Path | None) -> Path:
        from kb.indexing import ensure_bundled, resolve_index

        if self.index_arg:
            directory = Path(self.index_arg)
            if not (directory / "manifest.json").exists():
                from kb.service import no_index_message

                raise KbError(no_index_message(directory))  # a folder of documents is named as such
            return directory
        if kb is not None:
            if kb not in self._built:
                self._built[kb] = cached_index(kb, self.settings, self.progress)
            return self._built[kb]
        directory, bundled = resolve_index(self.settings, None)
        if bundled:
            ensure_bundled(directory, self.settings, self.progress)
        return directory

    def target(self, kb: Path | None, langs: tuple[str, ...] | None = None) -> Target:
        from index.store import subset

        directory = self._directory(kb)
        key = (directory, langs)
        if key not in self._targets:
            loaded = self._load(directory)
            if langs:
                loaded = subset(loaded, set(langs))
            label = str(directory) + (f" [{'+'.join(langs)}]" if langs else "")
            if self.settings.store.backend == "milvus":  # the same rows, searched in Milvus
                loaded = _in_milvus(loaded, label, self.settings)
                label += " (milvus)"
            self._targets[key] = Target(loaded, label, list(loaded.manifest.get("sources", [])), langs)
        return self._targets[key]

    def for_set(self, gold: GoldSet) -> Target:
        return self.target(gold.kb, gold.langs)

    def for_kbs(self, gold: GoldSet) -> dict[str, Target]:
        """A real-post set: one target per knowledge base it names."""
        return {name: self.target(root) for name, root in (gold.kbs or {}).items()}
