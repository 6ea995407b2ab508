"""The ranking model and gate: fitting recovers what the data says, files round-trip, errors say what to do."""

import json

import numpy as np
import pytest

from evaluation.fitting import (
    fit_gate,
    fit_rank,
    fit_small_index,
    pick_confident,
    pick_threshold,
    pick_unshared_floor,
)
from index.gate import shares_no_word, unshared_and_far
from index.ranker import (
    GATE_FEATURES,
    Linear,
    ModelError,
    RankModel,
    load_model,
    query_shape,
    smallness,
    softmax_by_group,
)


def test_softmax_is_taken_within_each_group():
    p = softmax_by_group(np.array([0.0, 0.0, 5.0, 1.0, 1.0]), np.array([0, 0, 1, 1, 1]))
    assert p[:2] == pytest.approx([0.5, 0.5]) and p[2:].sum() == pytest.approx(1.0) and p[2] > 0.9


def test_listwise_fit_learns_which_feature_finds_the_answer():
    rng = np.random.default_rng(0)
    xs, ys, groups = [], [], []
    for g in range(200):  # feature 0 marks the answer (noisily); feature 1 is noise
        x = rng.normal(size=(10, 2))
        y = np.zeros(10, dtype=bool)
        y[rng.integers(10)] = True
        x[y, 0] += 3.0
        xs.append(x), ys.append(y), groups.append(np.full(10, g))
    model = fit_rank(np.vstack(xs), np.concatenate(ys), np.concatenate(groups), ("signal", "noise"))
    assert model.weights[0] > 1.0 and abs(model.weights[1]) < 0.3
    scores = model(np.vstack(xs)).reshape(200, 10)
    top_right = np.mean([ys[g][np.argmax(scores[g])] for g in range(200)])
    assert top_right > 0.8


def test_gate_fit_gives_probabilities_that_follow_the_evidence():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 1))
    y = rng.random(400) < 1 / (1 + np.exp(-3 * x[:, 0]))
    gate = fit_gate(x, y, ("evidence",))
    p = 1 / (1 + np.exp(-gate(np.array([[-2.0], [0.0], [2.0]]))))
    assert p[0] < 0.1 and 0.3 < p[1] < 0.7 and p[2] > 0.9


def test_gate_weights_keep_the_sign_of_the_evidence_even_when_the_data_would_turn_them():
    # Two collinear features: main_coverage says the entry covers the post, known_missing_share
    # (in truth the same thing turned round) comes with noise that happens to track the label.
    # Left free, a fit gives "the entry lacks more of the post" a positive weight.
    rng = np.random.default_rng(3)
    cover = rng.random(600)
    right = rng.random(600) < 1 / (1 + np.exp(-6 * (cover - 0.5)))
    missing = 1.0 - cover + 0.4 * right + rng.normal(scale=0.05, size=600)
    x = np.column_stack([cover, missing, rng.normal(size=600)])
    names = ("main_coverage", "known_missing_share", "has_title")  # for, against, no direction
    free = fit_gate(x, right, ("a", "b", "c"))
    assert free.weights[1] > 0.2  # what the data alone teaches
    gate = fit_gate(x, right, names)
    assert gate.weights[0] > 0.5 and gate.weights[1] <= 0.0
    lacks_more = gate(np.array([[0.5, 0.9, 0.0]])) <= gate(np.array([[0.5, 0.1, 0.0]]))
    assert lacks_more.all()
    small = fit_small_index(x, gate(x), np.full(600, 0.9), right, names, np.ones(600))
    assert small.weights[0] >= 0.0 and small.weights[1] <= 0.0


def test_threshold_turns_away_at_most_the_budget_of_answerable_queries():
    answerable = np.linspace(0.05, 1.0, 100)
    unanswerable = np.linspace(0.0, 0.5, 50)
    t = pick_threshold(answerable, unanswerable, 0.05)
    assert np.mean(answerable < t) <= 0.05 and np.mean(unanswerable < t) > 0.05
    assert np.mean(answerable < pick_threshold(answerable, unanswerable, 0.0)) == 0.0


def test_confident_level_keeps_the_precision_of_matches():
    conf = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    right = np.array([1, 1, 1, 0, 1, 0], dtype=bool)
    assert pick_confident(conf, right, 0.8) == 0.5  # 4 right of the 5 at or above 0.5
    assert pick_confident(conf, right, 1.0) == 0.7
    assert pick_confident(conf, np.zeros(6, dtype=bool), 0.5) == 1.0


def test_the_gate_of_a_small_index_learns_what_the_lead_is_worth_there_and_leaves_large_ones_alone():
    rng = np.random.default_rng(2)
    n = 3000
    lead, evidence = rng.normal(size=n), rng.normal(size=n)
    small = rng.choice([0.0, 0.5, 0.975], size=n)
    # In a large index the lead and the evidence both tell; in a small one only the evidence does.
    truth = np.where(small > 0, 2.5 * evidence, 1.5 * lead + 1.5 * evidence)
    right = rng.random(n) < 1 / (1 + np.exp(-truth))
    x = np.column_stack([lead, evidence])
    gate = fit_gate(x[small == 0], right[small == 0], ("lead", "evidence"))
    assert gate.weights[0] > 1.0
    part = small > 0
    fitted = fit_small_index(
        x[part], gate(x[part]), small[part], right[part], ("lead", "evidence"), np.ones(part.sum())
    )
    model = RankModel(gate, gate, {}, small=fitted)
    big_lead = np.array([[3.0, 0.0]])  # far ahead of the others, nothing else for it
    assert model.confidence(big_lead, 0.0) == pytest.approx(RankModel(gate, gate, {}).confidence(big_lead))
    assert model.confidence(big_lead, 0.0)[0] > 0.9 and model.confidence(big_lead, 0.975)[0] < 0.7
    assert model.confidence(np.array([[0.0, 2.0]]), 0.975)[0] > 0.9  # evidence still counts there
    assert smallness(1) == pytest.approx(0.975) and smallness(40) == 0.0 and smallness(1000) == 0.0


def test_a_question_in_two_languages_is_one_question_of_an_index():
    from types import SimpleNamespace

    from index.search import questions

    def entry(id_, translation=None):
        return SimpleNamespace(id=id_, translation=translation)

    entries = [entry("a", "b"), entry("b", "a"), entry("c"), entry("d", "not indexed")]
    index = SimpleNamespace(entries=entries, by_id={e.id: i for i, e in enumerate(entries)})
    assert questions(index) == 3


def test_a_short_query_sharing_no_word_with_its_top_entry_needs_a_closer_meaning_than_any_fitted_one():
    right_unshared = np.array([0.61, 0.43, 0.75])
    floor = pick_unshared_floor(right_unshared)
    assert 0.42 < floor < 0.43 and pick_unshared_floor(np.array([])) == 0.0

    def row(dense: float, **words: float) -> np.ndarray:
        r = np.zeros(len(GATE_FEATURES))
        for name, value in {"dense_max": dense, **words}.items():
            r[GATE_FEATURES.index(name)] = value
        return r

    assert shares_no_word(row(0.3)) and not shares_no_word(row(0.3, bm25_abs=0.2))
    assert unshared_and_far(row(0.3), "short", floor)
    assert not unshared_and_far(row(0.43), "short", floor)  # as close as a right one was
    assert not unshared_and_far(row(0.3, title_coverage=0.5), "short", floor)  # a word in common
    assert not unshared_and_far(row(0.3), "post", floor)  # posts: the gate alone decides
    assert not unshared_and_far(row(0.3), "short", 0.0)  # a model file without a floor


def test_query_shape():
    assert query_shape("a title", 1) == "post" and query_shape("", 5) == "post"
    assert query_shape("", 1) == "short"


def test_model_file_round_trips_and_a_bad_one_says_how_to_fix_it(tmp_path):
    lin = Linear(("a", "b"), np.zeros(2), np.ones(2), np.array([1.0, -1.0]), 0.5)
    small = Linear(("a", "b"), np.zeros(2), np.ones(2), np.array([0.0, 2.0]), -1.0)
    model = RankModel(lin, lin, {"post": 0.1, "short": 0.3}, {"embedder": "x"}, 0.6, small, 0.4)
    path = tmp_path / "m.json"
    model.save(path)
    back = load_model(str(path))
    assert back.thresholds == {"post": 0.1, "short": 0.3} and back.confident == 0.6
    assert back.unshared_dense == 0.4
    rows = np.array([[1.0, 2.0]])
    assert back.confidence(rows, 0.5) == pytest.approx(model.confidence(rows, 0.5))
    assert back.confidence(rows, 0.5) != pytest.approx(back.confidence(rows, 0.0))
    answered = Linear(("a", "b"), np.zeros(2), np.ones(2), np.array([-1.0, 0.5]), 0.0)
    two = RankModel.from_dict({**model.to_dict(), "answered": answered.to_dict()})
    assert two.answered_probability(rows) == pytest.approx(1 / (1 + np.exp(0.0)))
    assert two.confidence(rows) == pytest.approx(model.confidence(rows))  # the right gate is unchanged
    older = {k: v for k, v in model.to_dict().items() if k not in ("small", "unshared_dense")}
    (tmp_path / "older.json").write_text(json.dumps(older))  # a file from before either
    assert load_model(str(tmp_path / "older.json")).unshared_dense == 0.0
    # a file from before the answered gate: the thresholds read the right gate
    assert back.answered_probability(rows, 0.5) == pytest.approx(back.confidence(rows, 0.5))
    assert load_model(str(tmp_path / "older.json")).confidence(rows, 0.9) == pytest.approx(
        back.confidence(rows, 0.0)
    )
    assert back.threshold("post") == 0.1 and back.threshold("unknown") == 0.1
    x = np.array([[1.0, 2.0]])
    assert back.rank(x) == pytest.approx(lin(x))
    assert back.rank.select(np.array([[5.0, 1.0, 2.0]]), ("c", "a", "b")).tolist() == [[1.0, 2.0]]
    with pytest.raises(ModelError, match="refit it"):
        back.rank.select(np.array([[1.0]]), ("a",))
    (tmp_path / "bad.json").write_text(json.dumps({"rank": {}}))
    with pytest.raises(ModelError, match="eval/fit.py"):
        load_model(str(tmp_path / "bad.json"))


def test_the_shipped_model_reads_the_features_the_searcher_computes():
    from evaluation import gate_fit
    from index.features import FEATURES
    from index.ranker import GATE_FEATURES, PRECEDENT_GATE

    plain = tuple(f for f in GATE_FEATURES if f not in PRECEDENT_GATE)
    model = load_model()
    taught = model.with_precedents
    assert taught is not None and taught.with_gaps is not None
    for m, gate in ((model, plain), (taught, plain), (taught.with_gaps, GATE_FEATURES)):
        assert set(m.rank.features) <= set(FEATURES) and tuple(m.gate.features) == gate
        assert m.small is not None and tuple(m.small.features) == gate
        assert m.answered is not None and tuple(m.answered.features) == gate
        assert m.answered_small is not None and tuple(m.answered_small.features) == gate
        assert m.meta["data"] and m.meta["cross_validated"]["hit@1"] > 0
    # Each gate of an index with precedents was fitted with the budget the fit names for it now.
    assert taught.meta["posts_budget"] == gate_fit.PRECEDENTED_POSTS_BUDGET
    assert taught.with_gaps.meta["posts_budget"] == gate_fit.GAPPED_POSTS_BUDGET
    # The model with gaps ranks as the one it is nested in, and the file holds its trees once.
    assert taught.with_gaps.rank is taught.rank and "rank" not in taught.to_dict()["with_gaps"]
    assert model.for_index(True, True) is taught.with_gaps and model.for_index(False, True) is model


def _constant(features: tuple[str, ...], logit: float) -> Linear:
    n = len(features)
    return Linear(features, np.zeros(n), np.ones(n), np.zeros(n), logit)


@pytest.mark.slow
def test_no_match_is_the_answered_gates_call_and_the_match_level_the_right_gates(seeds_index):
    import dataclasses

    from index.embed import get_embedder
    from index.search import Searcher
    from index.store import load

    searcher = Searcher(load(seeds_index), get_embedder())
    post = "NCCL error(2) unhandled system error when two nodes start training"
    shipped = searcher.model
    features = shipped.gate.features

    def model(answered: float, right: float):
        return dataclasses.replace(
            shipped,
            gate=_constant(features, right),
            small=None,
            answered=_constant(features, answered),
            answered_small=None,
            thresholds={"post": 0.5, "short": 0.5},
            confident=0.5,
            unshared_dense=0.0,
        )

    c = searcher.candidates(post)
    sure = searcher.decide(post, c, model=model(answered=5.0, right=5.0))
    assert sure.hits and not sure.weak and sure.confidence == pytest.approx(1 / (1 + np.exp(-5.0)))
    # the index answers it, but the top answer may not be the one: the closest entry, no commands
    closest = searcher.decide(post, c, model=model(answered=5.0, right=-5.0))
    assert closest.hits and closest.weak and closest.hits[0].entry == sure.hits[0].entry
    # nothing in the index answers it, however sure the right gate is of its top answer
    none = searcher.decide(post, c, model=model(answered=-5.0, right=5.0))
    assert none.no_match and none.suggestions[0].entry == sure.hits[0].entry


@pytest.mark.slow
def test_the_answered_gate_learns_whether_the_index_answers_a_query_not_whether_it_was_ranked_first(
    seeds_index, monkeypatch
):
    # "No match" is for a post the index cannot answer. Taught instead that a post whose answer
    # came second is one to turn away, the gate could barely tell answerable posts from others.
    from evaluation import crossval, fitting
    from evaluation.gold import Expected, GoldRow, GoldSet
    from index.embed import get_embedder
    from index.search import Searcher
    from index.store import load

    searcher = Searcher(load(seeds_index), get_embedder())
    queries = [
        "NCCL error(2) unhandled system error", "ssh: Could not resolve hostname node-1", "免密登录怎么配置",
        "多机训练卡住不动", "HCCL 超时 EI0006", "nvidia-smi 看不到 GPU", "训练速度比单机慢很多",
        "Duplicate GPU detected: rank 0 and rank 1 both on CUDA device", "NCCL error(5) invalid usage",
        "How do I check that NCCL works between two nodes?", "ping 不通另一台机器", "端口被防火墙挡住了",
    ]  # fmt: skip
    rows = []
    for n, q in enumerate(queries):
        ranked, _ = searcher.rank(searcher.candidates(q), searcher.model)  # "no match" or not
        for rank in (0, 1):  # the answer as the top entry, and as the runner-up
            e = searcher.index.entries[ranked[rank][0]]
            rows.append(GoldRow(f"q{n}-{rank}", q, "en", "question", (Expected(e.doc, line=e.start_line),)))
        rows.append(GoldRow(f"q{n}-none", q + " on Windows with one GPU", "en", "question", ()))
    examples = crossval.collect(
        GoldSet("mine", seeds_index / "mine.jsonl", rows), {None: searcher}, real=True
    )
    taught: list[np.ndarray] = []
    real_fit_gate = fitting.fit_gate

    def fit_gate(x, y, *args, **kwargs):
        taught.append(y)
        return real_fit_gate(x, y, *args, **kwargs)

    monkeypatch.setattr(fitting, "fit_gate", fit_gate)
    model = crossval.fit(examples)
    assert len(taught) == 2 and model.answered is not None  # the right gate, then the answered gate
    ids = [ex.row.id for ex in examples if len(ex.candidates.entries)]
    right, answered = (dict(zip(ids, labels, strict=True)) for labels in taught)
    for n in range(len(queries)):
        # the same query twice: only one of its two answers can come first, and both are answers
        assert answered[f"q{n}-0"] and answered[f"q{n}-1"], queries[n]
        assert not answered[f"q{n}-none"] and not right[f"q{n}-none"], queries[n]
    assert all(answered[i] for i in ids if right[i]) and sum(right.values()) < sum(answered.values())
