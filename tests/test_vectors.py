"""index/vectors.py: the stores (exact in numpy up to EXACT_MAX_ROWS, IVF in FAISS above) and
SegmentedVectors, the VectorIndex seam that gives each row's entry and kind across segments."""

import numpy as np

from index.vectors import FlatStore, SegmentedVectors, VectorStore


def test_ivf_recall_against_exact_and_mmap_load(tmp_path):

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(50, 64))
    x = centers[rng.integers(0, 50, 6000)] + 0.3 * rng.normal(size=(6000, 64))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    q = x[:40] + 0.05 * rng.normal(size=(40, 64)).astype(np.float32)
    approx, exact = VectorStore.build(x, kind="ivf"), VectorStore.exact(x)
    assert approx.kind == "ivf" and exact.kind == "flat"
    _, a = approx.search(q, 10)
    _, e = exact.search(q, 10)
    recall = np.mean([len(set(r1) & set(r2)) / 10 for r1, r2 in zip(a, e, strict=True)])
    assert recall >= 0.95
    for store, name in ((approx, "ivf.index"), (exact, "flat.index")):
        store.save(tmp_path / name)
        loaded = VectorStore.load(tmp_path / name)
        assert loaded.kind == store.kind and loaded.size == 6000
        assert np.array_equal(loaded.search(q, 10)[1], store.search(q, 10)[1])


def test_index_type_follows_the_size(monkeypatch):
    from index import vectors

    monkeypatch.setattr(vectors, "EXACT_MAX_ROWS", 500)
    x = np.random.default_rng(1).normal(size=(3000, 16)).astype(np.float32)
    assert vectors.VectorStore.build(x[:500]).kind == "flat"
    assert vectors.VectorStore.build(x).kind == "ivf"
    assert vectors.ivf_lists(254_000) == 1024


def test_rows_come_back_with_their_entry_and_kind():
    x = np.eye(4, dtype=np.float32)
    vectors = SegmentedVectors.single(
        FlatStore(x), np.array([0, 0, 1, 2]), ["title", "answer", "title", "signature"]
    )
    hits = vectors.search(x[[1, 3]], 6)  # more rows asked for than there are
    assert hits.entries.shape == hits.scores.shape == hits.kinds.shape == (2, 4)
    assert hits.entries[0][0] == 0 and hits.kinds[0][0] == "answer" and hits.scores[0][0] > 0.99
    assert hits.entries[1][0] == 2 and hits.kinds[1][0] == "signature"
    assert vectors.size == 4 and vectors.kind == "flat"
    empty = SegmentedVectors.single(FlatStore(np.zeros((0, 4), np.float32)), np.zeros(0), [])
    assert empty.search(x[:1], 5).entries.shape == (1, 0)
