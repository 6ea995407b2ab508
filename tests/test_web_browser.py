"""The web chat (kb/doors/web/chat.py) in a real browser: Debian's chromium, driven headless by Playwright, against
`kb serve` on 127.0.0.1 with the seeds index. It takes no pictures: eval/screenshots.py writes the
committed ones (the test run used to rewrite eval/results/web_answer.png)."""

from __future__ import annotations

import pytest
from chat_page import ANSWERED, browser_page, needs_chromium
from helpers import HCCL_LINE, NCCL_LINE, kb_server, training_log

pytestmark = [pytest.mark.slow, needs_chromium]


@pytest.fixture(scope="module")
def page_url(seeds_index, tmp_path_factory):
    with kb_server(seeds_index, tmp_path_factory.mktemp("browser-log") / "serve.log") as base:
        yield base + "/"


@pytest.fixture()
def page(page_url):
    with browser_page(page_url) as tab:
        yield tab


def _ask(page, text: str, n_answers: int) -> str:
    """Type/fill `text`, press Enter, wait for answer number `n_answers`; its text."""
    page.fill("#kb-query textarea", text)
    page.press("#kb-query textarea", "Enter")
    page.wait_for_function(ANSWERED, arg=n_answers)
    return page.locator("#kb-chat .bot-row").nth(n_answers - 1).inner_text()


def _open_citation(page, bot) -> None:
    bot.locator("a", has_text="[1]").first.click()
    entry = page.locator("#kb-entry .kb-entry")
    entry.wait_for()
    assert HCCL_LINE in entry.locator(".kb-entry-title").inner_text()
    assert "001_6befd99b7fbb14ab.txt:5-7" in entry.locator(".kb-entry-meta").inner_text()
    assert "ASCEND_SLOG_PRINT_TO_STDOUT" in entry.locator(".kb-entry-body").first.inner_text()
    translation = entry.locator(".kb-translation")
    assert (
        "Chinese version" in translation.inner_text()
        and "1343225860" in translation.locator("h4").inner_text()
    )
    assert "/entry/" not in page.url  # the link opened in the panel, not as a new page


def test_paste_log_answer_command_citation_panel(page):
    # 1. A noisy 200-line NCCL log: the answer names the NCCL error(2) entry.
    nccl = training_log(
        ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', NCCL_LINE]
    )
    assert len(nccl.splitlines()) == 200
    answer = _ask(page, nccl, 1)
    assert "NCCL error(2)" in answer and "002_1ad754c4b0581e45.txt:623-629" in answer
    assert page.input_value("#kb-query textarea") == ""  # the box is emptied for the next question
    assert "200-line log" in page.locator("#kb-chat .user-row").first.inner_text()

    # 2. Clear, then paste (Ctrl+V) a 5,000-line HCCL log: it all lands in the box, and the
    #    answer's command sits in its own code block with a copy button.
    page.click("#kb-new")
    page.wait_for_function("() => document.querySelectorAll('#kb-chat .bot-row').length === 0")
    key = f"[ERROR] HCCL(12345,python):2024-05-10-09:31:02.114 [hccl_plugin.cc:88] {HCCL_LINE}"
    hccl = training_log([key], n=5000, seed=5)
    page.evaluate("text => navigator.clipboard.writeText(text)", hccl)
    page.click("#kb-query textarea")
    page.keyboard.press("Control+V")
    assert page.input_value("#kb-query textarea") == hccl
    page.press("#kb-query textarea", "Enter")
    page.wait_for_function(ANSWERED, arg=1)
    answer = page.locator("#kb-chat .bot-row").first.inner_text()
    assert HCCL_LINE in answer
    assert "5000-line log" in page.locator("#kb-chat .user-row").first.inner_text()
    bot = page.locator("#kb-chat .bot-row").first
    block = bot.locator(".code_wrap", has_text="export ASCEND_SLOG_PRINT_TO_STDOUT=1")
    assert block.count() == 1
    assert block.locator("pre code").inner_text().strip() == "export ASCEND_SLOG_PRINT_TO_STDOUT=1"
    assert block.locator("button.copy_code_button").count() == 1

    # 3. Citation [1] opens the cited entry, with its Chinese version, in the side panel.
    _open_citation(page, bot)

    # 4. A follow-up keeps the conversation's context (on its own it matches nothing).
    follow = _ask(page, "What if I run it inside Docker?", 2)
    assert HCCL_LINE in follow

    # 5. Shift+Enter adds a line instead of sending.
    page.click("#kb-query textarea")
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert page.input_value("#kb-query textarea") == "first line\nsecond line"
    assert page.locator("#kb-chat .bot-row").count() == 2


# ---------------------------------------------------------------------------------------------
# With an LLM configured (a scripted OpenAI-compatible server): the answer streams in
# ---------------------------------------------------------------------------------------------
LLM_REPLY = (
    "HCCL could not load its plugin; the rank table is usually wrong [1].\n"
    "Regenerate `rank_table.json` with hccl_tools, then read HCCL's own log [1]:\n\n"
    "```bash\nexport ASCEND_SLOG_PRINT_TO_STDOUT=1\n```"
)


@pytest.fixture(scope="module")
def llm_page_url(seeds_index, tmp_path_factory):
    pytest.importorskip("langchain_openai", reason="needs the llm extra: pip install 'bilingual-kb[llm]'")
    from openai_stub import OpenAIStub, Reply

    with OpenAIStub() as stub:
        stub.script(Reply(LLM_REPLY, chunk_delay_s=0.06))  # about two seconds of trickling tokens
        env = stub.kb_env(timeout_s=20)
        log = tmp_path_factory.mktemp("browser-llm-log") / "serve.log"
        with kb_server(seeds_index, log, env=env) as base:
            yield base + "/", stub


def test_llm_answer_streams_into_the_page(llm_page_url):
    url, stub = llm_page_url
    with browser_page(url) as page:
        page.fill("#kb-query textarea", HCCL_LINE)
        page.press("#kb-query textarea", "Enter")
        # While the model is still sending, part of the answer shows with a cursor after it.
        page.wait_for_function(
            "() => { const m = document.querySelector('#kb-chat .bot-row');"
            " return m && m.innerText.includes('rank table') && m.innerText.includes('▌'); }"
        )
        partial = page.locator("#kb-chat .bot-row").first.inner_text()
        assert "Sources" not in partial
        page.wait_for_function(ANSWERED, arg=1)
        final = page.locator("#kb-chat .bot-row").first
        text = final.inner_text()
        assert "the rank table is usually wrong" in text and "Sources" in text and "▌" not in text
        assert final.locator("a", has_text="[1]").count() >= 2  # in the text and in the sources
        assert final.locator("pre code", has_text="export ASCEND_SLOG_PRINT_TO_STDOUT=1").count() >= 1
    assert stub.requests and stub.requests[0].body.get("stream") is True


def test_the_models_no_match_verdict_shows_as_no_match_in_the_page(llm_page_url):
    """The model read the entries retrieval matched and found none about the problem: the page
    says so and lists them as not a match; the verdict's marker never reaches the reader."""
    from openai_stub import Reply

    from kb.answer import LABELS
    from kb.llm import NONE_APPLIES

    url, stub = llm_page_url
    stub.script(NONE_APPLIES)
    try:
        with browser_page(url) as page:
            text = _ask(page, HCCL_LINE, 1)
            assert LABELS["en"]["judged_none"] in text and LABELS["en"]["suggest"] in text
            assert NONE_APPLIES not in text and "Sources" not in text
            assert page.locator("#kb-chat .bot-row").first.locator("pre code").count() == 0
    finally:
        stub.script(Reply(LLM_REPLY, chunk_delay_s=0.06))
