"""Which store holds an index: FAISS files in a folder (the default: nothing to start, fastest on
one machine) or Milvus (Milvus Lite in a local folder, or a server that several replicas share).

The rest of the code asks this module to build, open and watch an index and gets a LoadedIndex
whose vectors and words are reached only through the seams (index/seams.py), so ranking and the
no-match gate are the same code over either store. Settings arrive as a StoreOptions (the core's
`[store]` settings, kb/indexing.py `store_options`); pymilvus is imported only for Milvus.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .store import LoadedIndex

BACKENDS = ("faiss", "milvus")


@dataclass(frozen=True)
class StoreOptions:
    backend: str = "faiss"
    uri: str = "./kb.db"  # Milvus: a Milvus Lite folder, or http://host:19530
    token: str = ""  # Milvus server credentials (from the environment)
    name: str = "kb"  # Milvus: the alias of the live generation

    @property
    def milvus(self) -> bool:
        return self.backend == "milvus"

    def milvus_options(self):
        from .milvus_store import MilvusOptions

        return MilvusOptions(self.uri, self.token, self.name)


FAISS = StoreOptions()


def load_index(store: StoreOptions, directory: Path, embedder: str | None = None) -> LoadedIndex:
    if store.milvus:
        from .milvus_store import load

        return load(store.milvus_options(), embedder)
    from .store import load as load_files

    return load_files(Path(directory), embedder)


def live_generation(store: StoreOptions, directory: Path) -> str | None:
    """The name of the live generation (what a server polls to pick up a rebuild)."""
    if store.milvus:
        from .milvus_store import connect, generation_of, live_collection

        meta = live_collection(connect(store.milvus_options()), store.name)
        return generation_of(meta) if meta else None
    from .store import read_manifest

    return (read_manifest(Path(directory)) or {}).get("generation")


def live_manifest(store: StoreOptions, directory: Path) -> dict | None:
    """The live index's manifest (its sources, generation, embedder), None when there is no
    index yet: read from the Milvus generation the alias names, or from the FAISS folder."""
    if store.milvus:
        from .milvus_store import connect, live_collection, read_manifest

        client = connect(store.milvus_options())
        meta = live_collection(client, store.name)
        return read_manifest(client, meta) if meta else None
    from .store import read_manifest as read_files_manifest

    return read_files_manifest(Path(directory))


def has_index(store: StoreOptions, directory: Path) -> bool:
    if store.milvus:
        return live_generation(store, directory) is not None
    return (Path(directory) / "manifest.json").exists()


def build_index(store: StoreOptions, directory: Path, entries, embedder, **kw):
    """index/build.py `build` for FAISS; index/milvus_build.py `build` for Milvus (which takes
    no vector options: its dense index is exact)."""
    if store.milvus:
        from .milvus_build import build as build_milvus

        kw.pop("vector_options", None)
        return build_milvus(store.milvus_options(), entries, embedder, **kw)
    from .build import build

    return build(Path(directory), entries, embedder, **kw)


def label(store: StoreOptions, directory: Path) -> str:
    return store.milvus_options().label if store.milvus else str(directory)
