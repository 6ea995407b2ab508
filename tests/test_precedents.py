"""Precedents (index/precedents.py, kb/precedents.py): a post that reads like one a team answered
before gets that post's entry, through the `precedents` setting (real embedder, real seeds index,
the committed model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SHARED, needs_shared

from index.precedents import Precedents

FIVE = "002_1ad754c4b0581e45.txt"  # the Paddle guide: its `NCCL error(5)` entry
# A post in our own words: the error names neither NCCL error(5) nor its cause, which that
# entry gives in Chinese only (one card used by several processes); without precedents the
# GPU check section ranks first.
POST = (
    "Duplicate GPU detected when fine-tuning on 4 cards\n"
    "Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 3d000\n"
    "the job stops right after start"
)
# An earlier post of the team, other words, the same trouble, confirmed with that entry.
EARLIER = (
    "Two ranks report the same card\n"
    "Duplicate GPU detected : rank 1 and rank 3 both on CUDA device 81000\n"
    "launching 8 workers, what is wrong with my setup?"
)


def test_column_takes_the_closest_precedent_of_an_entry_or_its_translation():
    class E:
        def __init__(self, translation=None):
            self.translation = translation

    entries = [E(), E("b"), E("a"), E()]
    by_id = {"a": 1, "b": 2}
    v = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    prec = Precedents(v, np.array([1, 1, 3]))
    col = prec.column(np.array([1.0, 0.0]), np.array([0, 1, 2, 3]), entries, by_id)
    # entry 1 answered two earlier posts (cosines 1.0 and 0.6), entry 2 is its translation,
    # entry 3 answered a post at right angles to this one, entry 0 none
    assert col.tolist() == pytest.approx([0.0, 1.0, 1.0, 0.0])
    assert not Precedents.empty().column(np.array([1.0, 0.0]), np.array([0, 1]), entries, by_id).any()
    assert not prec.column(None, np.array([0, 1]), entries, by_id).any()


def test_words_column_weighs_the_rare_words_a_post_shares_with_a_precedent():
    class E:
        translation = None

    entries = [E(), E(), E()]
    v = [np.array([1.0, 0.0], dtype=np.float32)] * 3
    texts = [
        "NCCL error: Duplicate GPU detected on rank 1, training failed",
        "NCCL error: connection timed out, training failed",
        "training failed with NCCL error while saving",
    ]
    # a gap: its words count in how common a word is, and it answers nothing
    prec = Precedents.of(
        v, [frozenset({0}), frozenset({1}), frozenset({2})], v[:1], texts, ["NCCL error, training failed"]
    )
    post = "Duplicate GPU detected: rank 3 and rank 0, NCCL error, training failed"
    col = prec.words_column(post, np.array([0, 1, 2]), entries, {})
    # the shared rare words (duplicate, gpu, detected) outweigh the words every post has
    assert col[0] > 0.5 > col[1] and col[0] > col[2]
    assert col[1] > 0  # a shared common word still counts a little
    assert not prec.words_column("nothing alike here", np.array([0, 1]), entries, {}).any()
    # without the posts' texts (an index given vectors only) the column is 0
    plain = Precedents.of(v, [frozenset({0}), frozenset({1}), frozenset({2})])
    assert not plain.words_column(post, np.array([0, 1, 2]), entries, {}).any()


def test_gap_is_how_much_closer_the_nearest_unanswered_post_reads_than_the_nearest_answered():
    answered = [np.array([1.0, 0.0], dtype=np.float32)]
    gaps = [np.array([0.0, 1.0], dtype=np.float32), np.array([0.6, 0.8], dtype=np.float32)]
    prec = Precedents.of(answered, [frozenset({0})], gaps)
    assert prec.gap(np.array([0.0, 1.0])) == pytest.approx(
        1.0
    )  # a gap itself, at right angles to the answered
    assert prec.gap(np.array([0.6, 0.8])) == pytest.approx(0.4)  # 1.0 to a gap, 0.6 to the answered post
    assert prec.gap(np.array([1.0, 0.0])) == 0.0  # closer to the answered post
    assert Precedents.of(answered, [frozenset({0})]).gap(np.array([0.0, 1.0])) == 0.0  # no gaps
    assert prec.gap(None) == 0.0 and prec.gap_count == 2 and not prec.enough_gaps
    # Gaps count only beside enough answered posts (MIN_POSTS), from MIN_GAPS on.
    from index.precedents import MIN_GAPS, MIN_POSTS

    rnd = np.random.default_rng(0)
    many = list(rnd.normal(size=(MIN_POSTS, 2)).astype(np.float32))
    some = list(rnd.normal(size=(MIN_GAPS, 2)).astype(np.float32))
    assert Precedents.of(many, [frozenset({0})] * MIN_POSTS, some).enough_gaps
    assert not Precedents.of(many, [frozenset({0})] * MIN_POSTS, some[1:]).enough_gaps
    assert not Precedents.of(many[1:], [frozenset({0})] * (MIN_POSTS - 1), some).enough_gaps


def test_labels_name_entries_by_line_range_title_or_line_with_their_translation():
    from index.labels import Expected, answering, by_document
    from ingest.entry import Entry

    def entry(i, doc, start, end, title, translation=None):
        return Entry(id=i, content_hash="", doc=doc, lang="en", title=title, heading_path=(), body="",
                     start_line=start, end_line=end, translation=translation)  # fmt: skip

    entries = [entry("a", "x.md", 1, 9, "NCCL error(5)", "b"), entry("b", "zh/x.md", 1, 9, "NCCL 错误 5", "a"),
               entry("c", "x.md", 10, 30, "Duplicate GPU detected")]  # fmt: skip
    by_id = {e.id: i for i, e in enumerate(entries)}
    docs = by_document(entries)
    assert answering(entries, by_id, [Expected("x.md", start=1, end=12)], docs) == {0, 1}
    assert answering(entries, by_id, [Expected("x.md", title="**Duplicate GPU detected**")], docs) == {2}
    assert answering(entries, by_id, [Expected("x.md", line=20)]) == {2}
    assert answering(entries, by_id, [Expected("y.md", line=2)], docs) == frozenset()


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _entry_line(kb, doc: str, title: str) -> int:
    return next(e.start_line for e in kb.index.entries if e.doc == doc and e.title.startswith(title))


@needs_shared
def test_posts_answered_before_put_their_entry_first(seeds_kb, seeds_index):
    """The real posts as precedents of the seeds index (read by path, never copied): three of
    them are a `Duplicate GPU detected` log answered by the NCCL error(5) entry."""
    from kb.config import load_settings
    from kb.service import KnowledgeBase

    before = seeds_kb.search(POST)
    assert (before.hits or before.suggestions)[0].entry.title != "NCCL error(5)"
    real = SHARED / "eval" / "real_dev.jsonl"
    kb = KnowledgeBase.open(index=str(seeds_index), settings=load_settings(precedents=str(real)))
    # ranked by the model with precedents (its gate: the one for gaps, the file has 31 of them)
    assert kb._searcher.precedents.enough and kb._searcher.model.rank is kb.model.with_precedents.rank
    assert kb.stats()["ranker"]["precedents"] >= 25 and kb.stats()["ranker"]["with_precedents"]
    after = kb.search(POST)
    top = (after.hits or after.suggestions)[0].entry
    assert (top.doc, top.title) == (FIVE, "NCCL error(5)")


@needs_shared
def test_a_few_precedents_leave_the_ranking_as_it_was(seeds_kb, seeds_index, tmp_path):
    """Below MIN_POSTS the index is ranked by the model without precedents; rows answered by
    another index's entries, rows without labels and unchecked "no match" rows are left out, a
    row answered by nothing is a gap."""
    from kb.config import load_settings
    from kb.service import KnowledgeBase

    line = _entry_line(seeds_kb, FIVE, "NCCL error(5)")
    file = _write(
        tmp_path / "solved.jsonl",
        [
            {
                "id": "t1",
                "query": EARLIER,
                "lang": "en",
                "kind": "log",
                "expected": [{"doc": FIVE, "line": line}],
            },
            {"id": "t2", "query": "how do I bake bread", "lang": "en", "kind": "question", "expected": []},
            {"id": "t4", "query": "how do I brew tea", "expected": [], "checked": False},
            {"id": "t5", "query": "a row without its labels"},
            {
                "id": "t3",
                "query": "x",
                "lang": "en",
                "kind": "q",
                "expected": [{"doc": "other.md", "line": 3}],
            },
            "not a row",
        ],
    )
    kb = KnowledgeBase.open(index=str(seeds_index), settings=load_settings(precedents=str(file)))
    assert kb._searcher.precedents.posts == 1 and not kb._searcher.precedents.enough
    assert kb._searcher.precedents.gap_count == 1 and kb.stats()["ranker"]["gaps"] == 1
    assert kb._searcher.model is kb.model
    assert [h.entry.id for h in kb.search(POST).suggestions + kb.search(POST).hits] == [
        h.entry.id for h in seeds_kb.search(POST).suggestions + seeds_kb.search(POST).hits
    ]


@needs_shared
def test_precedents_that_name_nothing_here_are_an_error_that_says_what_to_give(seeds_index, tmp_path):
    from kb.config import load_settings
    from kb.errors import KbError
    from kb.service import KnowledgeBase

    elsewhere = _write(
        tmp_path / "other.jsonl",
        [
            {
                "id": "t1",
                "query": "x y z",
                "lang": "en",
                "kind": "q",
                "expected": [{"doc": "other.md", "line": 3}],
            }
        ],
    )
    for setting, says in (
        (str(elsewhere), "names an entry of this index"),
        (str(tmp_path / "nope.jsonl"), "cannot read"),
    ):
        with pytest.raises(KbError) as e:
            KnowledgeBase.open(index=str(seeds_index), settings=load_settings(precedents=setting))
        assert "precedents" in str(e.value) and says in str(e.value)


# Posts in our own words, like unanswerable real posts (Windows has no NCCL; a single-GPU script
# that needs a process group): nothing in the seeds answers them.
UNANSWERED = (
    "Training on my Windows laptop stops at startup\nRuntimeError: Distributed package doesn't have "
    "NCCL built in\nOne RTX 3060, Windows 11, torch 2.1. Is there a way to train here?",
    "Single GPU run fails\nRuntimeError: Default process group has not been initialized, please make "
    "sure to call init_process_group.\nI only have one GPU and did not launch with torchrun",
)


@needs_shared
def test_posts_nothing_answered_before_turn_away_one_that_reads_like_them(seeds_index, tmp_path):
    """The real posts as precedents: their unanswerable ones are gaps, and a new post that reads
    like them gets "no match". The same rows marked `checked: false` (a "no match" nobody looked
    at, as kb feedback export writes it) are no gaps: the model with precedents ranks, and shows
    those posts an entry."""
    from kb.config import load_settings
    from kb.service import KnowledgeBase

    real = SHARED / "eval" / "real_dev.jsonl"
    rows = [json.loads(line) for line in real.read_text("utf-8").splitlines()]
    unchecked = _write(
        tmp_path / "unchecked.jsonl", [r if r["expected"] else {**r, "checked": False} for r in rows]
    )
    with_gaps = KnowledgeBase.open(index=str(seeds_index), settings=load_settings(precedents=str(real)))
    without = KnowledgeBase.open(index=str(seeds_index), settings=load_settings(precedents=str(unchecked)))
    gaps = sum(not r["expected"] for r in rows)
    assert with_gaps.stats()["ranker"] | {"gaps": gaps, "with_gaps": True} == with_gaps.stats()["ranker"]
    assert with_gaps._searcher.model is with_gaps.model.with_precedents.with_gaps
    assert without.stats()["ranker"]["gaps"] == 0 and without._searcher.model is without.model.with_precedents
    for post in UNANSWERED:
        assert with_gaps.search(post).no_match, post
        shown = without.search(post)
        assert not shown.no_match and shown.hits, post
    # A post one of the gaps' neighbours answered keeps its entry (the precedents test's post).
    top = (with_gaps.search(POST).hits or [None])[0]
    assert top is not None and (top.entry.doc, top.entry.title) == (FIVE, "NCCL error(5)")


@needs_shared
def test_a_reloaded_index_does_not_embed_its_precedents_again(seeds_index, monkeypatch):
    from kb.config import load_settings
    from kb.service import KnowledgeBase

    kb = KnowledgeBase.open(
        index=str(seeds_index), settings=load_settings(precedents=str(SHARED / "eval" / "real_dev.jsonl"))
    )
    embedded: list[str] = []
    embed = kb.embedder.embed_queries
    monkeypatch.setattr(kb.embedder, "embed_queries", lambda texts: embedded.extend(texts) or embed(texts))
    again = kb._searcher_of(kb.index)  # what a rebuilt index's reload does
    assert embedded == [] and again.precedents.posts == kb._searcher.precedents.posts
    assert np.array_equal(again.precedents.vectors, kb._searcher.precedents.vectors)
    assert np.array_equal(again.precedents.gaps, kb._searcher.precedents.gaps)


def test_a_fit_takes_only_checked_unanswerable_posts_as_gaps():
    """evaluation/precedents.py reads a team's rows as kb/precedents.py does: an unanswerable row
    marked `checked: false` (an unvoted "no match") is no gap."""
    from types import SimpleNamespace

    from evaluation.crossval import Example
    from evaluation.gold import GoldRow
    from evaluation.precedents import with_precedents
    from index.features import FEATURES
    from index.search import Candidates

    index = SimpleNamespace(entries=[SimpleNamespace(translation=None)], by_id={})
    searcher = SimpleNamespace(index=index)

    def post(rid, vector, answers=frozenset(), checked=True):
        row = GoldRow(rid, "q", "en", "log", expected=(), checked=checked)
        c = Candidates(None, "en", [], np.array([0]), np.zeros((1, len(FEATURES))), np.zeros(1), {}, {}, {})
        ex = Example("team", row, None, searcher, c, np.zeros(1, dtype=bool), 0.0, real=True)
        ex.vector, ex.answers = np.asarray(vector, dtype=np.float32), answers
        return ex

    answered, checked = post("a", [1.0, 0.0, 0.0], frozenset({0})), post("b", [0.0, 1.0, 0.0])
    unchecked = post("c", [0.0, 0.0, 1.0], checked=False)
    asked = [post("new", [0.0, 0.6, 0.8]), post("new2", [0.0, 0.0, 1.0])]
    near_checked, near_unchecked = with_precedents(asked, [answered, checked, unchecked])
    assert near_checked.candidates.gap == pytest.approx(0.6)  # 0.6 to the checked gap, 0 to the answered post
    assert near_unchecked.candidates.gap == 0.0  # the post it reads like is no gap
