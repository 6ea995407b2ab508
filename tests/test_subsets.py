"""Real posts searched in one-document indexes (evaluation/subsets.py): which documents, how their
searches are folded and weighed, and what is reported of them. The gate they fit is tested in
tests/test_small_index.py (behaviour) and tests/test_ranker.py (the fit)."""

from test_evaluate import A, B, row

from evaluation.gold import Expected, GoldRow
from evaluation.metrics import Shown


def test_one_document_searches_are_fitted_and_scored_with_their_posts_fold(monkeypatch):
    from evaluation import crossval
    from evaluation.crossval import Example

    posts = [GoldRow(f"d{i}", "q", "en", "exact", (Expected("a.md", line=1),), kb="alpha") for i in range(10)]
    dev = [Example("real_dev", r, "alpha", None, None, None, 0.0, real=True) for r in posts]
    docs = [Example("real_dev_docs", r, f"alpha:{d}", None, None, None, 0.0, gate_only=True)
            for r in posts for d in ("x.md", "y.md")]  # fmt: skip
    trained: list[tuple[set[str], int]] = []  # per fold: the posts fitted on, and their searches

    def fit(train):
        trained.append(({ex.row.id for ex in train}, sum(ex.gate_only for ex in train)))
        return len(trained) - 1

    monkeypatch.setattr(crossval, "fit", fit)
    monkeypatch.setattr(crossval, "decide", lambda ex, model, k: model)  # the outcome names its fold's model
    outcomes, folds, held = crossval.cross_validate(dev, [], 5, companions=docs)
    assert len(folds) == len(dev) == len(outcomes) and len(held) == len(docs)
    fold_of = {ex.row.id: f for ex, f in zip(dev, folds, strict=True)}
    for ex, model in zip(docs, held, strict=True):
        assert model == fold_of[ex.row.id]  # scored by the model of its post's fold
        assert ex.row.id not in trained[model][0]  # which was not fitted on its post
    assert all(len(posts) == 8 and searches == 16 for posts, searches in trained)


def test_one_document_searches_of_a_post_weigh_as_much_together_as_one_it_answers():
    import numpy as np

    from evaluation.crossval import Example
    from evaluation.metrics import Outcome
    from evaluation.subsets import balance, held_out

    post = GoldRow("d1", "q", "en", "exact", (Expected("a.md", line=12),), kb="alpha")
    other = GoldRow("d2", "q", "en", "exact", (Expected("b.md", line=1),), kb="alpha")

    def search(row, answered):
        return Example(
            "real_dev_docs", row, "doc", None, None, np.array([answered, False]), 0.0, gate_only=True
        )

    searches = balance([search(post, True), *(search(post, False) for _ in range(4)), search(other, False)])
    assert [ex.share for ex in searches] == [1.0, 0.25, 0.25, 0.25, 0.25, 1.0]
    right = Shown(A)  # A is a.md:10-20, the entry post d1's label names
    outcomes = [Outcome(False, [right], [right]), *(Outcome(True, [], [Shown(B)]) for _ in range(3))]
    outcomes += [Outcome(False, [Shown(B)], [Shown(B)]), Outcome(False, [Shown(B)], [Shown(B)], weak=True)]
    report = held_out(searches, outcomes)
    assert report["answered"] == 1 and report["others"] == 5 and report["answered_right"] == 1.0
    assert report["answered_wrong"] == 0.0 and report["others_matched"] == 0.2  # a weak answer is no match
    # Two splits of a repeated cross-validation: the same searches, the shares their mean.
    missed = [Outcome(True, [], [Shown(B)]) for _ in range(6)]
    twice = held_out(searches, outcomes + missed, splits=2)
    assert (twice["answered"], twice["others"], twice["answered_right"], twice["others_matched"]) == (
        1,
        5,
        0.5,
        0.1,
    )


def test_one_document_indexes_are_every_small_knowledge_bases_document_and_the_labelled_others(tmp_path):
    from evaluation.gold import GoldSet
    from evaluation.subsets import documents, one_document_root
    from kb.config import load_settings

    small, big = tmp_path / "small", tmp_path / "big"
    for name in ("a.md", "b/c.md", "MANIFEST.md"):
        (small / name).parent.mkdir(parents=True, exist_ok=True)
        (small / name).write_text("# Q?\n\nA.\n")
    for n in range(25):
        (big / f"f{n}.md").parent.mkdir(parents=True, exist_ok=True)
        (big / f"f{n}.md").write_text(f"# Q{n}?\n\nA.\n")
    labelled = GoldRow("d1", "q", "en", "exact", (Expected("f7.md", start=1, end=3, kb="big"),), kb="big")
    gold = GoldSet(
        "dev", tmp_path / "dev.jsonl", [labelled, row([], id="u")], kbs={"small": small, "big": big}
    )
    assert [(kb, doc) for kb, _, doc in documents(gold)] == [
        ("big", "f7.md"),
        ("small", "a.md"),
        ("small", "b/c.md"),
    ]
    settings = load_settings(eval_cache=str(tmp_path / "cache"))
    folder = one_document_root(settings, "small", small, "b/c.md")
    assert [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()] == ["b/c.md"]
    (small / "b/c.md").write_text("# Changed?\n\nB.\n")  # a changed document is copied again
    assert (
        (one_document_root(settings, "small", small, "b/c.md") / "b/c.md").read_text().startswith("# Changed")
    )
