"""index/lexical.py: BM25 as a sparse matrix of precomputed weights (the LexicalIndex seam)."""

import math
from collections import Counter

import numpy as np
import pytest

from index.lexical import Bm25


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

    from index.lexical import Bm25, CountsBuilder

    rng = random.Random(0)
    words = [f"w{i}" for i in range(200)] + ["nccl", "超时"]
    docs = [[rng.choice(words) for _ in range(rng.randint(0, 30))] for _ in range(300)]
    Bm25.build(docs).save(tmp_path)
    previous = Bm25.load(tmp_path)
    # A rebuild: the first ten docs dropped, docs 10..149 copied, 150..159 edited (one new term,
    # and "w199" no longer used by them), the rest copied, five added.
    edited = [[*docs[i][:3], "brandnew"] for i in range(150, 160)]
    added = [["w1", "w2"]] * 5
    builder = CountsBuilder(previous)
    builder.copy(previous, 10, 150)
    builder.add(edited)
    builder.copy(previous, 160, 300)
    builder.add(added)
    reused = builder.finish()
    docs2 = docs[10:150] + edited + docs[160:] + added
    fresh = Bm25.build(docs2)
    assert reused.n_docs == fresh.n_docs == len(docs2)
    assert set(reused.terms) == set(fresh.terms)
    assert all(sorted(reused.doc_terms(i)) == sorted(set(d)) for i, d in enumerate(docs2))
    for query in (["nccl", "w3", "w3"], ["brandnew", "超时"], ["w100", "w7", "w0"]):
        (a, best_a), (b, best_b) = reused.scores(query), fresh.scores(query)
        assert np.allclose(a, b, rtol=1e-6) and best_a == pytest.approx(best_b)
    # Terms only the dropped docs used leave the vocabulary.
    only_dropped = {t for d in docs[:10] for t in d} - {t for d in docs2 for t in d}
    assert not only_dropped & set(reused.terms)


def test_bm25_file_is_read_by_scipy_too(tmp_path):
    from scipy import sparse

    from index.lexical import Bm25

    bm = Bm25.build([["a", "b"], ["b", "c", "c"]])
    bm.save(tmp_path)
    m = sparse.load_npz(tmp_path / "bm25.npz")  # the layout scipy writes: older indexes stay readable
    assert m.shape == (2, 3) and m.format == "csc"
    again = Bm25.load(tmp_path)
    assert np.allclose(again.scores(["c", "a"])[0], bm.scores(["c", "a"])[0])


def test_the_seam_answers_what_the_features_need():
    bm = Bm25.build([["nccl", "error"], ["hccl", "timeout"], ["nccl", "timeout"]])
    assert "nccl" in bm and "unknown" not in bm
    assert bm.idf("unknown") is None
    assert bm.idf("hccl") == bm.max_idf > bm.idf("nccl") > 0  # in one doc of three, then in two
    scores, best = bm.scores(["nccl", "nccl", "unknown"])
    assert scores.shape == (3,) and scores[1] == 0 and scores[0] > 0 and best >= scores.max()
