"""The systems `kb eval` compares: ours and the baselines a user would otherwise build.

Baselines, same embedder, same entries: BM25 only (the index's BM25, the raw query tokenized),
dense only (the raw query embedded, best cosine over the same entry rows), and the LangChain
recipe (RecursiveCharacterTextSplitter(1000, 200) over the raw documents, FAISS, similarity
search; chunks mapped back to entries by line). None of the baselines can say no_match.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kb.config import Settings

from . import langchain_recipe as recipe
from .indexes import Target, cache_root
from .metrics import Outcome, Shown

SYSTEMS = ("ours", "bm25", "dense", "langchain")
SYSTEM_LABELS = {
    "ours": "ours (post reader, fitted ranking and no-match gate)",
    "bm25": "BM25 only",
    "dense": "dense only",
    "langchain": "LangChain recipe",
}


def _with_translations(loaded, idx: Sequence[int]) -> list[Shown]:
    by_id = loaded.by_id
    out = []
    for i in idx:
        e = loaded.entries[i]
        t = loaded.entries[by_id[e.translation]] if e.translation in by_id else None
        out.append(Shown(e, t))
    return out


class Ours:
    """Our search. `model` replaces the fitted ranking model (cross-validation passes the one
    fitted without the rows it scores)."""

    name = "ours"

    def __init__(self, target: Target, embedder, model=None) -> None:
        from index.search import Searcher

        self.searcher = Searcher(target.loaded, embedder, model)

    def run(self, query: str, k: int) -> Outcome:
        return outcome_of(self.searcher.search(query, k=k))


def outcome_of(result) -> Outcome:
    """A SearchResult as the judge sees it."""
    ranking = [Shown(h.entry, h.translation) for h in (result.hits or result.suggestions)]
    return Outcome(
        result.no_match,
        [] if result.no_match else ranking,
        ranking,
        confidence=result.confidence,
        weak=result.weak,
    )


class Bm25Only:
    """BM25 over the same entry texts, with the raw query tokenized (no log reading, no fusion)."""

    name = "bm25"

    def __init__(self, target: Target) -> None:
        self.loaded = target.loaded

    def run(self, query: str, k: int) -> Outcome:
        import numpy as np

        from index.text import tokenize

        scores, _ = self.loaded.lexical.scores(tokenize(query[:20000], stem=True))
        order = [int(i) for i in np.argsort(-scores)[:k] if scores[i] > 0]
        shown = _with_translations(self.loaded, order)
        return Outcome(False, shown, shown)


class DenseOnly:
    """The same embedder and the same entry rows, the raw query embedded as it is, best row per
    entry (no query views, no lexical leg, no gate)."""

    name = "dense"

    def __init__(self, target: Target, embedder) -> None:
        self.loaded = target.loaded
        self.embedder = embedder

    def run(self, query: str, k: int) -> Outcome:
        v = self.embedder.embed_queries([query])
        hits = self.loaded.vectors.search(v, max(4 * k, 50))
        order: list[int] = []
        for e in (int(x) for x in hits.entries[0]):
            if e >= 0 and e not in order:
                order.append(e)
            if len(order) >= k:
                break
        shown = _with_translations(self.loaded, order)
        return Outcome(False, shown, shown)


class LangChainRecipe:
    """What a LangChain user writes: RecursiveCharacterTextSplitter(1000, 200) over the raw
    documents, FAISS.from_documents with our default embedder behind an Embeddings adapter,
    similarity_search; each chunk is mapped back to the entries its lines overlap."""

    name = "langchain"

    def __init__(self, target: Target, embedder, progress=None, settings: Settings | None = None) -> None:
        self.loaded = target.loaded
        self.store = _langchain_store(target, embedder, progress, settings or Settings())
        self.by_doc: dict[str, list[int]] = {}
        for i, e in enumerate(self.loaded.entries):
            self.by_doc.setdefault(e.doc, []).append(i)

    def _entries_of(self, doc: str, start: int, end: int) -> list[int]:
        spans = []
        for i in self.by_doc.get(doc, []):
            e = self.loaded.entries[i]
            overlap = min(end, e.end_line) - max(start, e.start_line) + 1
            if overlap > 0:
                spans.append((-overlap, e.start_line, i))
        return [i for *_, i in sorted(spans)]

    def run(self, query: str, k: int) -> Outcome:
        docs = self.store.similarity_search(query, k=k)
        order: list[int] = []
        for d in docs:
            m = d.metadata
            for i in self._entries_of(m["doc"], m["start_line"], m["end_line"]):
                if i not in order:
                    order.append(i)
        shown = _with_translations(self.loaded, order[:k])
        return Outcome(False, shown, shown)


def _langchain_store(target: Target, embedder, progress, settings: Settings):
    """The recipe's FAISS store of the target's documents, cached by their text and the embedder."""
    from ingest.collect import doc_language
    from ingest.read import find_files, read_text

    files, _ = find_files(target.sources)
    texts = []
    for f in files:
        try:
            text = read_text(f.path)
        except Exception:  # the ingest report already names unreadable files
            continue
        if target.langs and doc_language(f.doc, text) not in target.langs:
            continue
        texts.append((f.doc, text))
    h = hashlib.sha1(f"{embedder.id}|{recipe.CHUNK_SIZE}|{recipe.CHUNK_OVERLAP}".encode())
    for doc, text in texts:
        h.update(doc.encode())
        h.update(text.encode())
    folder = cache_root(settings) / f"langchain-{h.hexdigest()[:16]}"
    lc_embeddings = recipe.embeddings(embedder)
    if (folder / "index.faiss").exists():
        return recipe.load(str(folder), lc_embeddings)
    chunked = recipe.chunks(texts)
    if progress:
        progress("chunks", 0, len(chunked))
    store = recipe.build(chunked, lc_embeddings)
    if progress:
        progress("chunks", len(chunked), len(chunked))
    folder.parent.mkdir(parents=True, exist_ok=True)
    store.save_local(str(folder))
    return store


def make_system(name: str, target: Target, embedder, model=None, progress=None, settings=None):
    if name == "ours":
        return Ours(target, embedder, model)
    if name == "bm25":
        return Bm25Only(target)
    if name == "dense":
        return DenseOnly(target, embedder)
    if name == "langchain":
        return LangChainRecipe(target, embedder, progress, settings)
    raise ValueError(f"unknown system {name!r}; one of {', '.join(SYSTEMS)}")
