"""Building the knowledge base's index: `kb ingest`, the bundled KB on first use, which index to open.

The core half of ingesting: ingest/ reads the documents, index/build.py writes the index; this
module picks the embedder and the limits from the Settings and reports what happened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .config import Settings, home_dir, load_settings
from .errors import KbError


def bundled_docs() -> Path:
    return Path(str(resources.files("kb") / "data" / "faq"))


def _fingerprint(folder: Path) -> str:
    h = hashlib.sha1()
    for p in sorted(folder.rglob("*.md")):
        h.update(p.relative_to(folder).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


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


def embedder_for(settings: Settings):
    """The embedder the settings name, loaded once per process (index/embed.py); "openai:MODEL"
    is a /v1/embeddings server (index/openai_embed.py)."""
    from index.embed import get_embedder

    if settings.embedder.startswith("openai:"):
        return _server_embedder(settings)
    return get_embedder(settings.embedder, settings.embed_threads, settings.model_cache)


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


def _collect(paths, settings: Settings, progress, follow_links_outside: bool):
    """The entries of the documents, and the files skipped and the files with a caveat."""
    from ingest.collect import collect
    from ingest.limits import Limits

    limits = Limits(
        settings.max_file_entries, settings.max_file_seconds, settings.max_file_bytes, settings.max_line_chars
    )
    report = collect(
        paths,
        progress=(lambda d, n, doc: progress("parse", d, n, doc)) if progress else None,
        follow_links_outside=follow_links_outside,
        limits=limits,
    )
    skipped = [str(p) for p in report.problems if p.skipped]
    warnings = [str(p) for p in report.problems if not p.skipped]
    if not report.entries:
        problems = "; ".join(skipped[:5])
        raise KbError(
            f"no FAQ entries found in {', '.join(map(str, paths))}" + (f" ({problems})" if problems else "")
        )
    return report, skipped, warnings


def ingest(
    paths: list[str],
    index_dir: Path,
    settings: Settings | None = None,
    progress: Callable[[str, int, int, str], None] | None = None,
    follow_links_outside: bool = False,
    embedder=None,
) -> IngestOutcome:
    """Parse the documents under `paths` and (re)build the index at `index_dir`. Links leaving
    the given folders are skipped (and reported) unless `follow_links_outside`. `embedder`
    replaces the one the settings name (the Embedder seam, index/seams.py)."""
    from index.backends import build_index, label
    from index.build import VectorOptions
    from ingest.link import link_translations, read_declared_pairs

    settings = settings or load_settings()
    report, skipped, warnings = _collect(paths, settings, progress, follow_links_outside)
    embedder = embedder or embedder_for(settings)
    pairs = read_declared_pairs(Path(p) for p in paths)

    def link(entries, title_vectors):
        return link_translations(
            entries, pairs, similarity=lambda a, b: title_vectors(a) @ title_vectors(b).T
        )

    stats = build_index(
        store_options(settings),
        index_dir,
        report.entries,
        embedder,
        sources=[str(Path(p).resolve()) for p in paths],
        problems=skipped,
        warnings=warnings,
        progress=(lambda stage, d, n: progress(stage, d, n, "")) if progress else None,
        link=link,
        vector_options=VectorOptions(settings.vector_index, settings.index_threads),
    )
    return IngestOutcome(
        entries=stats.entries,
        files=report.files,
        problems=skipped,
        warnings=warnings,
        embedded=stats.embedded,
        reused=stats.reused,
        seconds=stats.seconds_total,
        seconds_embed=stats.seconds_embed,
        index=label(store_options(settings), index_dir),
        stages=stats.stages(),
    )


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
    ingest([str(docs)], index_dir, settings, progress, embedder=embedder)
    index_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fp)
