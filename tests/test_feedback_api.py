"""`POST /api/feedback` (kb/doors/web/feedback_api.py) over real HTTP: the app `kb serve` runs,
served on 127.0.0.1, the seeds index, a feedback store in a home of the test's own. What is
refused is refused with the API's error shape and stores nothing."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import pytest
from helpers import DUPLICATE_GPU, NCCL_LINE, call, engineer_reader
from openai_stub import OpenAIStub

from kb.config import LlmSettings
from kb.feedback import MAX_COMMENT_CHARS, FeedbackStore

pytestmark = pytest.mark.slow

BREAD = "How do I bake sourdough bread with rye flour?"


@pytest.fixture(autouse=True)
def _gradio_files_here(tmp_path, monkeypatch):
    """The chat, built in this process, keeps its files here; the variable goes with the test
    (servers the later tests start inherit this process's environment)."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))


@contextmanager
def served(seeds_kb, home, feedback: bool = True, llm=None):
    """The chat + API app over the seeds index with its home (and feedback store) in `home`."""
    from kb.doors.host.app import create_app
    from kb.doors.host.server import Served
    from kb.service import KnowledgeBase

    settings = replace(seeds_kb.settings, home=str(home), feedback=feedback)
    if llm is not None:
        settings = replace(settings, llm=llm)
    kb = KnowledgeBase(settings, seeds_kb.index_dir, embedder=seeds_kb.embedder)
    server = Served(create_app(kb)).start()
    try:
        yield f"http://127.0.0.1:{server.address[1]}"
    finally:
        server.stop()


def test_votes_are_stored_with_what_was_shown(seeds_kb, tmp_path):
    with served(seeds_kb, tmp_path) as base:
        status, up, _ = call(base, "POST", "/api/feedback", body={"query": NCCL_LINE, "vote": "up"})
        assert status == 201 and (up["vote"], up["in_queue"]) == ("up", False)
        assert up["shown"]["match"] == "match" and up["shown"]["entries"][0]["title"] == "NCCL error(2)"
        down = {"query": NCCL_LINE, "vote": "down", "right_entry": "NCCL error(5)", "comment": "it was (5)"}
        status, body, _ = call(base, "POST", "/api/feedback", body=down)
        assert status == 201 and body["in_queue"] is True
        assert body["right_entry"]["title"] == "NCCL error(5)"  # what the name resolved to
        status, gap, _ = call(
            base, "POST", "/api/feedback", body={"query": BREAD, "vote": "down", "lang": "zh"}
        )
        assert status == 201 and gap["shown"]["match"] == "none" and gap["in_queue"] is True
    rows = FeedbackStore(tmp_path / "feedback.sqlite3").rows()
    assert [(r.door, r.vote, r.query) for r in rows] == [
        ("api", "up", NCCL_LINE),
        ("api", "down", NCCL_LINE),
        ("api", "down", BREAD),
    ]
    assert rows[1].right["title"] == "NCCL error(5)" and rows[1].comment == "it was (5)"
    assert rows[2].lang == "zh" and rows[0].generation == seeds_kb.stats()["generation"]
    assert [r.id for r in FeedbackStore(tmp_path / "feedback.sqlite3").rows(queue=True)] == [2, 3]


def test_what_is_refused_says_why_and_stores_nothing(seeds_kb, tmp_path):
    limit = seeds_kb.settings.max_query_bytes
    refused = [
        ({"query": NCCL_LINE, "vote": "sideways"}, 422, 'field "vote" must be "up" or "down"'),
        ({"query": NCCL_LINE}, 422, 'field "vote"'),
        ({"vote": "up"}, 422, '"query"'),
        ({"query": "  ", "vote": "up"}, 422, "the query is empty"),
        ({"query": "x" * (limit + 10), "vote": "up"}, 413, "KB_MAX_QUERY_BYTES"),
        (
            {"query": NCCL_LINE, "vote": "down", "right_entry": "no such entry"},
            422,
            "no entry 'no such entry'",
        ),
        ({"query": NCCL_LINE, "vote": "down", "comment": "c" * (MAX_COMMENT_CHARS + 1)}, 422, '"comment"'),
        ({"query": NCCL_LINE, "vote": "down", "comment": 5}, 422, 'field "comment" must be a string'),
        # "thanks!" got a word back, not an answer: a 👎 on it would put "thanks!" in the queue.
        ({"query": "thanks!", "vote": "down"}, 422, "not a question: no answer to rate"),
        ({"query": "好的谢谢，已经解决了", "vote": "up"}, 422, "no answer to rate"),
        ({"query": NCCL_LINE, "vote": "down", "right": "NCCL error(5)"}, 422, 'unknown field "right"'),
    ]
    with served(seeds_kb, tmp_path) as base:
        for body, status, message in refused:
            got, answer, _ = call(base, "POST", "/api/feedback", body=body)
            assert (got, answer["status"]) == (status, status), (body, answer)
            assert message in answer["error"], (message, answer)
        got, answer, _ = call(
            base, "POST", "/api/feedback", raw=b"vote=up", headers={"Content-Type": "text/plain"}
        )
        assert got == 415 and answer["status"] == 415
        cross_site = {"Origin": "http://evil.example"}
        got, _, _ = call(
            base, "POST", "/api/feedback", body={"query": NCCL_LINE, "vote": "down"}, headers=cross_site
        )
        assert got == 403
    assert FeedbackStore(tmp_path / "feedback.sqlite3").rows() == []


def test_turned_off_it_says_so(seeds_kb, tmp_path):
    with served(seeds_kb, tmp_path, feedback=False) as base:
        status, body, _ = call(base, "POST", "/api/feedback", body={"query": NCCL_LINE, "vote": "up"})
        assert status == 503 and "feedback is turned off" in body["error"]
        assert call(base, "POST", "/api/search", body={"query": BREAD})[0] == 200
    assert not (tmp_path / "feedback.sqlite3").exists()


@contextmanager
def asked_with_a_model(seeds_kb, home):
    """The app with a model that cites NCCL error(5) for DUPLICATE_GPU: its URL and /api/ask's JSON."""
    retrieval = seeds_kb.search(DUPLICATE_GPU)
    assert retrieval.strength == "weak" and "NCCL error(5)" not in retrieval.hits[0].entry.title, (
        "the premise: retrieval alone shows another entry, as its closest"
    )
    with OpenAIStub(respond=engineer_reader) as stub:
        llm = LlmSettings(model="stub-model", base_url=stub.base_url, timeout_s=5.0, max_retries=0)
        with served(seeds_kb, home, llm=llm) as base:
            status, answer, _ = call(base, "POST", "/api/ask", body={"query": DUPLICATE_GPU})
            assert status == 200 and answer["mode"] == "llm" and answer["match"] == "match"
            assert answer["citations"][0]["title"] == "NCCL error(5)"
            yield base, answer


def test_a_vote_with_the_answer_stores_what_the_model_answered(seeds_kb, tmp_path):
    with asked_with_a_model(seeds_kb, tmp_path) as (base, answer):
        vote = {"query": DUPLICATE_GPU, "vote": "up", "answer": answer}
        status, body, _ = call(base, "POST", "/api/feedback", body=vote)
        assert status == 201 and body["shown"]["match"] == "match"
        assert [e["title"] for e in body["shown"]["entries"]] == ["NCCL error(5)"]
        # Without the answer, the vote is stored with what retrieval shows: not what was read.
        status, plain, _ = call(base, "POST", "/api/feedback", body={"query": DUPLICATE_GPU, "vote": "up"})
        assert status == 201 and plain["shown"]["match"] == "weak"
        assert plain["shown"]["entries"][0]["title"] != "NCCL error(5)"
        # A follow-up answered together with the earlier question echoes both.
        followed = {**answer, "query": "Which NCCL error is it?\n" + DUPLICATE_GPU}
        vote = {"query": DUPLICATE_GPU, "vote": "up", "answer": followed}
        assert call(base, "POST", "/api/feedback", body=vote)[0] == 201
        # The echo is the question as the service read it: a NUL byte became a space.
        nul = {**answer, "query": DUPLICATE_GPU + " "}
        vote = {"query": DUPLICATE_GPU + "\x00", "vote": "up", "answer": nul}
        assert call(base, "POST", "/api/feedback", body=vote)[0] == 201
        _, searched, _ = call(base, "POST", "/api/search", body={"query": BREAD})
        status, gap, _ = call(
            base, "POST", "/api/feedback", body={"query": BREAD, "vote": "down", "answer": searched}
        )
        assert status == 201 and gap["in_queue"] is True and gap["shown"]["match"] == "none"
        assert [e["title"] for e in gap["shown"]["entries"]] == [h["title"] for h in searched["suggestions"]]
    votes = [r for r in FeedbackStore(tmp_path / "feedback.sqlite3").rows() if r.vote]
    assert [(r.vote, r.match) for r in votes] == [
        ("up", "match"),
        ("up", "weak"),
        ("up", "match"),  # the follow-up
        ("up", "match"),  # the NUL byte
        ("down", "none"),
    ]
    assert [e["title"] for e in votes[0].shown] == ["NCCL error(5)"]


def test_an_answer_that_is_not_the_one_given_is_refused_and_stores_nothing(seeds_kb, tmp_path):
    with asked_with_a_model(seeds_kb, tmp_path) as (base, answer):
        stranger = {**answer, "citations": [{**answer["citations"][0], "entry_id": "no-such-entry"}]}
        refused = [
            (
                {"answer": "it said error(5)"},
                'field "answer": it must be the JSON object an answer or a search gave',
            ),
            ({"answer": {**answer, "match": "sure"}}, 'no "match" of "match", "weak" or "none"'),
            ({"answer": {**answer, "query": NCCL_LINE}}, 'answers another question than "query"'),
            ({"query": "GPU", "answer": answer}, "answers another question"),  # a part of it is not it
            ({"answer": {k: v for k, v in answer.items() if k != "query"}}, 'it has no "query"'),
            ({"answer": {**answer, "citations": "[1]"}}, 'its "citations" must be a list'),
            ({"answer": {**answer, "citations": []}}, 'a "match" that shows no entry'),
            ({"answer": stranger}, "an entry this index does not hold ('no-such-entry')"),
            ({"answer": {**answer, "citations": [{"entry_id": ["x"]}]}}, "an entry this index does not hold"),
            (
                {"answer": {**answer, "query": "…", "query_truncated": True, "query_chars": "9"}},
                "another question",
            ),
        ]
        for extra, message in refused:
            body = {"query": DUPLICATE_GPU, "vote": "down", **extra}
            status, error, _ = call(base, "POST", "/api/feedback", body=body)
            assert (status, error["status"]) == (422, 422) and message in error["error"], error
    assert FeedbackStore(tmp_path / "feedback.sqlite3").rows() == []
