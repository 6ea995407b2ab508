"""kb/doors/web/render.py: the chat's markdown and the entry panel's HTML, without a server."""

import pytest
from helpers import HCCL_LINE

from ingest.entry import Entry

pytestmark = pytest.mark.slow


def _evil_entry() -> Entry:
    body = (
        "A: set `NCCL_DEBUG=INFO` and read `<rank>.log`.\n\n<script>alert('faq')</script>\n\n"
        '<img src=x onerror="alert(2)">\n\n[click](javascript:alert(3))\n\n```bash\necho "<b>ok</b>"\n```\n'
    )
    return Entry(
        id="e" * 16,
        content_hash="0",
        doc="faq/evil.md",
        lang="en",
        title="Evil <b>title</b>",
        heading_path=("FAQ",),
        body=body,
        start_line=3,
        end_line=12,
    )


def test_entry_html_shows_faq_html_as_text(seeds_kb):
    from kb.doors.web.render import entry_html

    page = entry_html(seeds_kb, _evil_entry())
    assert "<script" not in page and "&lt;script&gt;alert('faq')&lt;/script&gt;" in page.replace(
        "&#x27;", "'"
    )
    assert "<img" not in page and "&lt;img src=x" in page
    assert 'href="javascript:' not in page and "[click](javascript:alert(3))" in page  # left as text
    assert "Evil &lt;b&gt;title&lt;/b&gt;" in page and "faq/evil.md:3-12" in page
    assert "<pre><code" in page and "&lt;b&gt;ok&lt;/b&gt;" in page


def test_a_huge_entry_is_shown_as_plain_text_and_still_escaped(seeds_kb):
    from dataclasses import replace

    from kb.doors.web.render import MAX_LAID_OUT_CHARS, entry_html

    row = "| " + " | ".join(f"c{i}" for i in range(50)) + " |\n"
    table = row + "|" + "---|" * 50 + "\n" + row * (MAX_LAID_OUT_CHARS // len(row) + 10)
    page = entry_html(seeds_kb, replace(_evil_entry(), body="<script>x</script>\n\n" + table))
    assert "Too long to lay out" in page and "<table" not in page and "<script" not in page
    assert "c49 |" in page  # all of it, as text


def test_render_answer_commands_caution_and_citations(seeds_kb):
    from kb.doors.web.render import render_answer
    from kb.present import CAUTION

    answer = seeds_kb.ask("域名映射怎么配置")  # an entry whose commands include `reboot`
    assert "reboot" in answer.commands
    md = render_answer(answer)
    for c in answer.commands:  # each command shown once: in the text's code, else under "命令"
        assert c.splitlines()[0] in md
    listed = md.split("**命令**")[1]
    assert listed.count("```bash") == 2 and "/etc/hosts" not in listed  # not again under 命令
    caution_at = md.index(CAUTION["zh"])
    assert md.index("```bash\nreboot\n```") > caution_at
    assert md.count(CAUTION["zh"]) == 1  # only the destructive one
    for c in answer.citations:
        assert f"(entry/{c.entry.id})" in md
    assert f"[\\[1\\]](entry/{answer.citations[0].entry.id})" in md


def test_render_llm_answer_labels_its_own_code_blocks(seeds_kb):
    from kb.answer import Answer, Citation
    from kb.doors.web.render import render_answer
    from kb.present import CAUTION

    entry = seeds_kb.search("域名映射怎么配置").hits[0].entry
    text = "修改主机名后需要重启 [1]：\n\n```bash\nsudo vim /etc/hostname\nreboot\n```\n\n另见 `cat /etc/hostname` [1]"
    answer = Answer(
        query="q",
        lang="zh",
        text=text,
        commands=("sudo vim /etc/hostname", "reboot", "cat /etc/hostname"),
        citations=(Citation(1, entry),),
        no_match=False,
        mode="llm",
    )
    md = render_answer(answer)
    # The model's block is labelled, not repeated; the command it only mentions gets its own block.
    assert md.count(CAUTION["zh"]) == 1 and md.index(CAUTION["zh"]) < md.index("```bash\nsudo vim")
    assert md.count("reboot") == 1 and "```bash\ncat /etc/hostname\n```" in md


def test_render_no_match_offers_suggestions(seeds_kb):
    from kb.answer import LABELS
    from kb.doors.web.render import render_answer

    answer = seeds_kb.ask("how do I bake a chocolate cake with sprinkles")
    assert answer.no_match and answer.suggestions
    md = render_answer(answer)
    assert LABELS["en"]["no_match"] in md and LABELS["en"]["suggest"] in md
    assert md.count("](entry/") == len(answer.suggestions)
    assert md.startswith(f"**✗ {LABELS['en']['none']}**")


def test_thanks_get_a_word_back_without_a_no_match_badge(seeds_kb):
    from kb.answer import LABELS
    from kb.doors.web.render import render_answer

    # Nothing was searched, so "No match" would be a verdict on nothing.
    for message, lang in (("thanks, that fixed it", "en"), ("好的谢谢", "zh")):
        md = render_answer(seeds_kb.ask(message))
        assert md == LABELS[lang]["thanks"]
    assert render_answer(seeds_kb.ask("clear")) == LABELS["en"]["clear"]


def test_render_escapes_html_outside_code():
    from kb.doors.web.render import code_block, escape_md_html, render_user

    # Inline code becomes <code> with its text escaped (see tests/test_security_web.py for why).
    assert escape_md_html("<script>x</script> and `<keep>`") == (
        "&lt;script&gt;x&lt;/script&gt; and <code>&lt;keep&gt;</code>"
    )
    assert escape_md_html("```\n<a>\n```\n<b>") == "```\n<a>\n```\n&lt;b&gt;"
    assert code_block("echo ```x```").startswith("````bash\n")  # a fence longer than any run inside
    log = "\n".join(f"line {i}" for i in range(5000))
    shown = render_user(log, "en")
    assert "5000-line log" in shown and "line 4999" in shown and "line 10\n" not in shown


def test_notes_and_warnings_are_quotes_and_a_greater_than_sign_in_a_sentence_is_text():
    from markdown_it import MarkdownIt

    from kb.doors.web.render import escape_md_html

    md = escape_md_html("> [!WARNING]\n> Do not add `--shm-size` twice.\n\nWhen loss > 10, lower the rate.")
    tokens = [t.type for t in MarkdownIt("commonmark").parse(md)]
    assert tokens.count("blockquote_open") == 1 and "&gt;" not in md.split("\n\n")[0]
    assert md.endswith("When loss &gt; 10, lower the rate.")


def test_stream_hands_over_pieces_and_errors(seeds_kb):
    from kb.doors.web.turns import _Stream
    from kb.errors import QueryError

    stream = _Stream(seeds_kb, HCCL_LINE, None, [])
    pieces = list(stream.pieces())
    assert pieces and "".join(pieces) == stream.answer.text
    with pytest.raises(QueryError):
        list(_Stream(seeds_kb, "   ", None, []).pieces())
