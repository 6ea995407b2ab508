"""The LangChain recipe, written once: what a LangChain user builds for this job, used as a
baseline by `kb eval --compare` (evaluation/systems.py) and timed by eval/bench.py.

RecursiveCharacterTextSplitter(1000, 200) over the raw documents, FAISS.from_documents with our
default embedder behind LangChain's Embeddings interface, similarity_search. Each chunk records
its document and line range, so a hit can be mapped back to the entries it overlaps.
"""

from __future__ import annotations

import time

from kb.errors import KbError

CHUNK_SIZE, CHUNK_OVERLAP = 1000, 200  # as LangChain's documentation teaches it


def embeddings(embedder):
    """LangChain's Embeddings interface over an Embedder (index/seams.py). `seconds` adds up the
    time spent embedding documents (the benchmark reports it apart from FAISS)."""
    from langchain_core.embeddings import Embeddings

    class KbEmbeddings(Embeddings):
        seconds = 0.0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            t = time.perf_counter()
            try:
                return embedder.embed_documents(texts).tolist()
            finally:
                KbEmbeddings.seconds += time.perf_counter() - t

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed_queries([text])[0].tolist()

    return KbEmbeddings()


def chunks(texts: list[tuple[str, str]]) -> list:
    """The documents (doc, text) split as the recipe splits them, each chunk with its doc,
    start_line and end_line in its metadata."""
    try:
        from langchain_core.documents import Document
        from langchain_text_splitters import RecursiveCharacterTextSplitter
    except ImportError as e:
        raise KbError("the LangChain recipe needs the eval extra: pip install 'bilingual-kb[eval]'") from e
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP, add_start_index=True
    )
    out = []
    for doc, text in texts:
        for c in splitter.split_documents([Document(page_content=text, metadata={"doc": doc})]):
            first = text.count("\n", 0, c.metadata["start_index"]) + 1
            c.metadata.update(start_line=first, end_line=first + c.page_content.count("\n"))
            out.append(c)
    return out


def _faiss_store():
    """LangChain's FAISS store. It lives in langchain-community, which warns on import that it is
    being sunset; FAISS has no standalone integration package yet, and this is still the recipe
    people write, so the baseline keeps it and the warning is not shown to someone measuring."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*langchain-community.*sunset", category=DeprecationWarning
        )
        from langchain_community.vectorstores import FAISS
    return FAISS


def build(chunked: list, lc_embeddings):
    return _faiss_store().from_documents(chunked, lc_embeddings)


def load(folder: str, lc_embeddings):
    """A store this module saved (our own file: unpickling its docstore is safe)."""
    return _faiss_store().load_local(folder, lc_embeddings, allow_dangerous_deserialization=True)
