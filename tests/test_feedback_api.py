"""`POST /api/feedback` (kb/doors/web/feedback_api.py) over real HTTP: the app `kb serve` runs,
served on 127.0.0.1, the seeds index, a feedback store in a home of the test's own. What is
refused is refused with the API's error shape and stores nothing."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import pytest
from helpers import NCCL_LINE, call

from kb.feedback import MAX_COMMENT_CHARS, FeedbackStore

pytestmark = pytest.mark.slow

BREAD = "How do I bake sourdough bread with rye flour?"


@pytest.fixture(autouse=True)
def _gradio_files_here(tmp_path, monkeypatch):
    """The chat, built in this process, keeps its files here; the variable goes with the test
    (servers the later tests start inherit this process's environment)."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))


@contextmanager
def served(seeds_kb, home, feedback: bool = True):
    """The chat + API app over the seeds index with its home (and feedback store) in `home`."""
    from kb.doors.host.app import create_app
    from kb.doors.host.server import Served
    from kb.service import KnowledgeBase

    settings = replace(seeds_kb.settings, home=str(home), feedback=feedback)
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
