"""KbRetriever (kb/doors/retriever.py) inside a small LCEL chain: retriever -> prompt -> a chat
model served by the local OpenAI-compatible stand-in (tests/openai_stub.py) -> text. Retrieval is
real (the seeds index); only the model's words are scripted."""

from __future__ import annotations

import asyncio

import pytest
from helpers import HCCL_LINE, NCCL_LINE
from openai_stub import OpenAIStub

pytest.importorskip(
    "langchain_core", reason="needs the langchain extra: pip install 'bilingual-kb[langchain]'"
)
pytest.importorskip("langchain_openai", reason="needs the llm extra: pip install 'bilingual-kb[llm]'")
pytestmark = pytest.mark.slow

CHINESE = "使用OpenMPI多机多卡训练时，如何指定网卡？"
BREAD = "How do I bake sourdough bread with rye flour?"
NO_CONTEXT = "NO MATCHING ENTRY"


@pytest.fixture(scope="module")
def stub():
    with OpenAIStub() as s:
        yield s


def format_docs(docs) -> str:
    if not docs:
        return NO_CONTEXT
    return "\n\n".join(
        f"[{d.metadata['doc']}:{d.metadata['lines']}] {d.metadata['title']}\n{d.page_content}" for d in docs
    )


def make_chain(retriever, stub):
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from these FAQ entries only:\n{context}"), ("human", "{question}")]
    )
    model = ChatOpenAI(model="stub-model", base_url=stub.base_url, api_key="dummy", max_retries=0, timeout=20)
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | model
        | StrOutputParser()
    )


def test_documents_carry_the_entry_and_its_metadata(seeds_kb):
    from langchain_core.documents import Document

    from kb.doors.retriever import KbRetriever

    retriever = KbRetriever(kb=seeds_kb, k=3)
    docs = retriever.invoke(NCCL_LINE)
    result = seeds_kb.search(NCCL_LINE, 3)
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)
    assert [d.metadata["entry_id"] for d in docs] == [h.entry.id for h in result.hits]
    top, entry = docs[0], result.hits[0].entry
    assert top.page_content == entry.body
    assert {k: top.metadata[k] for k in ("doc", "lines", "title", "lang", "commands")} == {
        "doc": "002_1ad754c4b0581e45.txt",
        "lines": "623-629",
        "title": "NCCL error(2)",
        "lang": entry.lang,
        "commands": list(entry.commands),
    }
    assert top.metadata["score"] == round(result.hits[0].score, 6) and top.metadata["match"] == "match"
    assert "translation" in top.metadata
    linked = retriever.invoke(HCCL_LINE)[0].metadata  # an entry with a Chinese version
    assert linked["lang"] == "en" and linked["translation"]["lang"] == "zh"
    assert set(linked["translation"]) == {"entry_id", "doc", "lines", "title", "lang"}
    assert "1343225860" in linked["translation"]["title"]
    assert retriever.invoke(BREAD) == []  # "no match": no documents, not the nearest wrong ones
    assert asyncio.run(retriever.ainvoke(NCCL_LINE)) == docs
    assert [len(d) for d in retriever.batch([NCCL_LINE, BREAD])] == [3, 0]


def test_lcel_chain_with_a_local_openai_compatible_model(seeds_kb, stub):
    from kb.doors.retriever import KbRetriever

    chain = make_chain(KbRetriever(kb=seeds_kb, k=2), stub)
    stub.script("Increase the container's shared memory [002_1ad754c4b0581e45.txt:623-629].")
    assert (
        chain.invoke(NCCL_LINE)
        == "Increase the container's shared memory [002_1ad754c4b0581e45.txt:623-629]."
    )
    sent = stub.requests[0].body["messages"]
    assert (
        sent[0]["role"] == "system"
        and "[002_1ad754c4b0581e45.txt:623-629] NCCL error(2)" in sent[0]["content"]
    )
    assert seeds_kb.search(NCCL_LINE).hits[0].entry.body.strip()[:60] in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": NCCL_LINE}

    # Async, a Chinese question: the same chain through ainvoke.
    stub.script("用 btl_tcp_if_include 指定网卡。")
    assert asyncio.run(chain.ainvoke(CHINESE)) == "用 btl_tcp_if_include 指定网卡。"
    zh_context = stub.requests[0].body["messages"][0]["content"]
    assert seeds_kb.search(CHINESE, 2).hits[0].entry.title in zh_context

    # No match: the model is given no entry at all, so the chain can say so.
    stub.script("The knowledge base has nothing on this.")
    chain.invoke(BREAD)
    assert NO_CONTEXT in stub.requests[0].body["messages"][0]["content"]
