"""Feedback through every door into one store, as people use them: the chat in a real browser
(👎, then naming the right entry), Slack (a `block_actions` request over real HTTP to
`kb serve --slack`), `POST /api/feedback`, and `kb feedback` in the terminal; then the queue as
`kb feedback list` shows it and `kb feedback export` writes it, read back by `kb eval`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from chat_page import ANSWERED, CHROMIUM, browser_page
from conftest import ROOT
from helpers import DUPLICATE_GPU, NCCL_LINE, SECRET, call, engineer_reader, kb_serve, mention, post_event
from openai_stub import OpenAIStub
from slack_actions import feedback_click as click

from kb.feedback import FeedbackStore

pytestmark = pytest.mark.slow

BREAD = "How do I bake sourdough bread with rye flour?"
IN_DOCKER = "ExternalError: Nccl error(2), unhandled system error in docker"


def kb_cli(*args: str, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "KB_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "kb", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def test_terminal_votes_the_queue_and_gold_rows_kb_eval_reads(seeds_index, tmp_path):
    home, index = tmp_path / "home", str(seeds_index)
    for _ in range(2):  # the same unanswerable question twice: one group of two
        assert kb_cli("ask", BREAD, "--index", index, home=home).returncode == 0
    assert (
        kb_cli(
            "search", "How do I bake sourdough bread with rye flour??", "--index", index, home=home
        ).returncode
        == 0
    )
    voted = kb_cli(
        "feedback", "down", IN_DOCKER, "--right", "NCCL error(5)", "--comment", "it was error(5)", "--index", index,
        home=home,
    )  # fmt: skip
    assert voted.returncode == 0, voted.stderr
    assert "right entry: NCCL error(5)" in voted.stdout and "unanswered queue" in voted.stdout
    wrong = kb_cli("feedback", "down", IN_DOCKER, "--right", "no such entry", "--index", index, home=home)
    assert wrong.returncode == 1 and wrong.stderr.startswith("kb feedback: --right: no entry 'no such entry'")
    assert "Traceback" not in wrong.stderr
    up = kb_cli(
        "feedback", "up", "Init plugin so failed, ret = 1343225860", "--json", "--index", index, home=home
    )
    assert json.loads(up.stdout)["in_queue"] is False

    elsewhere = kb_cli("feedback", "list", "--json", home=home)  # the bundled KB's queue: another index
    assert json.loads(elsewhere.stdout)["groups"] == []
    assert "(5 rows of other indexes left out; --index names the index to read)" in elsewhere.stderr
    listed = json.loads(kb_cli("feedback", "list", "--json", "--index", index, home=home).stdout)["groups"]
    assert [(g["count"], g["no_match"], g["down"]) for g in listed] == [(3, 3, 0), (1, 0, 1)]
    assert listed[1]["named"][0]["title"] == "NCCL error(5)" and listed[1]["comments"] == ["it was error(5)"]
    text = kb_cli("feedback", "list", "--index", index, home=home).stdout
    assert "2 signatures, 4 questions" in text and "right: NCCL error(5)" in text

    gold = tmp_path / "feedback.jsonl"
    exported = kb_cli("feedback", "export", "--gold", str(gold), "--index", index, home=home)
    assert exported.returncode == 0 and "wrote 2 gold rows" in exported.stdout
    evaluated = kb_cli("eval", str(gold), "--index", index, "--json", "--no-cv", home=home)
    assert evaluated.returncode == 0, evaluated.stderr
    [report] = json.loads(evaluated.stdout)["sets"]
    assert report["unresolved_expected"] == []  # the named entry is found in the index
    overall = report["systems"]["ours"]["overall"]
    assert (overall["queries"], overall["answerable"], overall["unanswerable"]) == (2, 1, 1)
    # Scored as any gold set: the gap is turned away today; the entry the person named is not
    # ranked first yet, which is exactly the miss a maintainer adds the row for.
    assert overall["abstention"] == 1.0 and overall["hit@1"] == 0.0
    named_row = next(r for r in map(json.loads, gold.read_text().splitlines()[1:]) if r["expected"])
    assert [m["id"] for m in report["systems"]["ours"]["misses"]] == [named_row["id"]]


def test_terminal_votes_on_the_answer_it_saved_from_kb_ask(seeds_index, tmp_path):
    """With a language model, `kb ask` cites NCCL error(5) where retrieval's closest entry is
    another; a vote with `--answer` is stored with what the person read, and the question is
    taken from the answer when not given again."""
    home, index, saved = tmp_path / "home", str(seeds_index), tmp_path / "answer.json"
    with OpenAIStub(respond=engineer_reader) as stub:
        env = {**os.environ, **stub.kb_env(timeout_s=5), "KB_HOME": str(home)}
        cmd = [sys.executable, "-m", "kb", "ask", "--json", DUPLICATE_GPU, "--index", index]
        asked = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert asked.returncode == 0, asked.stderr
    saved.write_text(asked.stdout, encoding="utf-8")
    assert json.loads(asked.stdout)["citations"][0]["title"] == "NCCL error(5)"
    voted = kb_cli("feedback", "up", "--answer", str(saved), "--index", index, home=home)
    assert voted.returncode == 0 and "(match: NCCL error(5))" in voted.stdout, voted.stderr
    plain = kb_cli("feedback", "up", DUPLICATE_GPU, "--index", index, home=home)  # what retrieval shows
    assert plain.returncode == 0 and "weak:" in plain.stdout
    [with_answer, without] = FeedbackStore(home / "feedback.sqlite3").rows()
    assert (with_answer.query, with_answer.match) == (DUPLICATE_GPU, "match")
    assert [e["title"] for e in with_answer.shown] == ["NCCL error(5)"]
    assert without.match == "weak" and without.shown[0]["title"] != "NCCL error(5)"
    # What cannot be used says why and stores nothing.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(asked.stdout), "query": NCCL_LINE}), encoding="utf-8")
    for args, message in [
        (("--answer", str(tmp_path / "missing.json")), "cannot read it"),
        (("--answer", str(other), DUPLICATE_GPU), "answers another question"),
        ((), "give the question or log that was asked"),
    ]:
        refused = kb_cli("feedback", "down", *args, "--index", index, home=home)
        assert refused.returncode == 1 and message in refused.stderr, refused.stderr
    assert len(FeedbackStore(home / "feedback.sqlite3").rows()) == 2


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_web_slack_api_and_terminal_land_in_one_store(seeds_index, stub, tmp_path):
    home = tmp_path / "home"
    env = {"KB_HOME": str(home), "SLACK_BOT_TOKEN": stub.token, "SLACK_SIGNING_SECRET": SECRET}
    env["SLACK_API_URL"] = stub.api_url
    stub.reset()
    with kb_serve(seeds_index, tmp_path / "serve.log", env=env, args=("--slack",)) as server:
        base = server.base
        # 1. The chat: a question, 👎, the right entry named in the form.
        with browser_page(base + "/") as page:
            page.fill("#kb-query textarea", IN_DOCKER)
            page.press("#kb-query textarea", "Enter")
            page.wait_for_function(ANSWERED, arg=1)
            page.fill("#kb-query textarea", BREAD)
            page.press("#kb-query textarea", "Enter")
            page.wait_for_function(ANSWERED, arg=2)
            page.locator("#kb-chat button[aria-label='Dislike']").first.click()
            page.locator("#kb-feedback-send").wait_for(state="visible")
            page.click("#kb-feedback-entry input")  # the answer's entries are offered
            listed = page.locator("ul[role='listbox'] li")
            listed.first.wait_for()
            assert "NCCL error(2)" in listed.first.inner_text()
            page.keyboard.press("Escape")
            entry = page.locator("#kb-feedback-entry input")
            entry.fill("NCCL error(5)")  # or typed by its title
            entry.press("Enter")
            page.fill("#kb-feedback-comment textarea", "my log says error(5)")
            page.click("#kb-feedback-send")
            page.wait_for_function(
                "() => document.querySelector('#kb-feedback-note').innerText.includes('recorded')"
            )
            assert "NCCL error(5)" in page.locator("#kb-feedback-note").inner_text()
            assert not page.locator("#kb-feedback-send").is_visible()
        # 2. Slack: a mention answered with buttons, then the 👎 click Slack would send.
        url = base + "/slack/events"
        assert post_event(url, mention(NCCL_LINE))[0] == 200
        [post] = stub.wait_for("chat.postMessage")
        row_id = int(post.params["blocks"][-1]["block_id"].removeprefix("kb_feedback:"))
        assert click(url, post, row_id, "down")[0] == 200
        stub.wait_for("views.open")
        # 3. The API.
        status, body, _ = call(base, "POST", "/api/feedback", body={"query": NCCL_LINE, "vote": "up"})
        assert status == 201 and body["shown"]["entries"][0]["title"] == "NCCL error(2)"
    # 4. The terminal.
    assert kb_cli("feedback", "down", BREAD, "--index", str(seeds_index), home=home).returncode == 0

    rows = FeedbackStore(home / "feedback.sqlite3").rows()
    by_door = {}
    for r in rows:
        by_door.setdefault(r.door, []).append(r)
    assert set(by_door) == {"web", "slack", "api", "cli"}
    web = {r.query: r for r in by_door["web"]}
    assert web[IN_DOCKER].vote == "down" and web[IN_DOCKER].right["title"] == "NCCL error(5)"
    assert web[IN_DOCKER].comment == "my log says error(5)" and web[IN_DOCKER].match == "match"
    assert web[BREAD].match == "none" and web[BREAD].vote is None  # the chat's "no match", queued
    [slack] = by_door["slack"]
    assert (slack.id, slack.vote, slack.query) == (row_id, "down", NCCL_LINE)
    assert [(r.vote, r.in_queue) for r in by_door["api"]] == [("up", False)]
    assert [(r.vote, r.match) for r in by_door["cli"]] == [("down", "none")]
    assert len({r.generation for r in rows}) == 1
    assert {r.index for r in rows} == {str(seeds_index.resolve())}  # what `kb feedback list --index` reads
