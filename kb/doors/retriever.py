"""The LangChain door: `KbRetriever`, a retriever over the knowledge base for LangChain chains.

    from kb.doors.retriever import KbRetriever
    retriever = KbRetriever.open(index="./kb-index")       # or KbRetriever(kb=KnowledgeBase(...))
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
    docs = retriever.invoke("ExternalError: Nccl error(2)")  # also ainvoke, batch, abatch

Each Document is one matching entry: the entry's body as `page_content`, and in `metadata` its
`doc`, `lines` ("start-end"), `start_line`, `end_line`, `title`, `lang`, `score`, `commands`,
`translation` (the other-language version: entry_id, doc, lines, title; or None), `entry_id`,
`location` and the search's `match` ("match" or "weak": a weak hit is the closest entry, which may
not be the problem: a chain should say so and not run its commands) and `confidence`. "No match"
gives no documents: the chain gets an empty context instead of the nearest wrong entries.

The search is the knowledge base's own (kb/service.py): the post reader, the ranking and the
no-match gate; no chunking, no re-embedding. Needs langchain-core (pip install 'bilingual-kb[langchain]').
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


def _translation(hit) -> dict | None:
    t = hit.translation
    if t is None:
        return None
    return {
        "entry_id": t.id,
        "doc": t.doc,
        "lines": f"{t.start_line}-{t.end_line}",
        "title": t.title,
        "lang": t.lang,
    }


def to_document(hit, result) -> Document:
    e = hit.entry
    metadata = {
        "entry_id": e.id,
        "doc": e.doc,
        "lines": f"{e.start_line}-{e.end_line}",
        "start_line": e.start_line,
        "end_line": e.end_line,
        "location": e.location,
        "title": e.title,
        "lang": e.lang,
        "score": round(hit.score, 6),
        "commands": list(e.commands),
        "translation": _translation(hit),
        "match": result.strength,
        "confidence": None if result.confidence is None else round(result.confidence, 4),
    }
    return Document(page_content=e.body, metadata=metadata, id=e.id)


class KbRetriever(BaseRetriever):
    """Documents for the entries that match a query; none when nothing matches.

    kb: a KnowledgeBase (kb/service.py), or anything with its `search(query, k, lang)`;
    k: how many entries at most (default: the knowledge base's top_k); lang: the reader's language
    ("zh", "en"; default: the language of the query's own words), as `kb search --lang`.
    """

    kb: Any
    k: int | None = None
    lang: str | None = None

    @classmethod
    def open(cls, index: str | None = None, **kwargs: Any) -> KbRetriever:
        """A retriever over the index folder `index` (default: the configured one, else the
        bundled knowledge base)."""
        from ..service import KnowledgeBase

        return cls(kb=KnowledgeBase.open(index=index), **kwargs)

    def _documents(self, query: str) -> list[Document]:
        result = self.kb.search(query, self.k, self.lang)
        return [to_document(h, result) for h in result.hits]  # no hits when nothing matches

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(query)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        import asyncio

        # The search is CPU work (and releases the GIL in numpy/FAISS): off the event loop.
        return await asyncio.to_thread(self._documents, query)
