"""kb/doors/slack/blocks.py: an Answer as Block Kit messages within Slack's limits, and Slack markup read back."""

import json
from html import unescape

from helpers import reply_text
from slack_stub import BOT_USER

from kb.answer import LABELS, Answer, Citation
from kb.present import CAUTION


def _entry(n: int, doc: str = "nccl/en/faq.md", lang: str = "en", translation: str | None = None):
    from ingest.entry import Entry

    fields = dict(
        id=f"e{n}", content_hash="h", doc=doc, lang=lang, title=f"Entry <{n}> & co", heading_path=(),
        body="b", start_line=10 * n, end_line=10 * n + 5, signatures=(), commands=(), translation=translation,
    )  # fmt: skip
    return Entry(**fields)


def _all_text(messages) -> str:
    return "\n".join(reply_text(type("C", (), {"params": m})) for m in messages)


def test_blocks_respect_slack_limits_and_label_destructive_commands():
    from kb.doors.slack.blocks import MAX_BLOCKS, MAX_SECTION_CHARS, answer_messages

    commands = tuple(f"export NCCL_VAR_{i}=1" for i in range(60)) + ("rm -rf /tmp/nccl-*", "x" * 7000)
    long_text = "\n\n".join(f"Paragraph {i}: " + "shm too small; " * 40 for i in range(40))
    answer = Answer(
        query="q",
        lang="en",
        text=long_text + "\n\n```\n" + "log line\n" * 600 + "```",
        commands=commands,
        citations=(Citation(1, _entry(1, translation="z1")),),
        no_match=False,
    )
    messages = answer_messages(
        answer, "https://docs.example.org/kb/", lookup={"z1": _entry(9, "nccl/zh/faq.md", "zh")}.get
    )
    assert len(messages) > 1
    for m in messages:
        assert 0 < len(m["blocks"]) <= MAX_BLOCKS and m["text"]
        for b in m["blocks"]:
            text = b["text"]["text"] if "text" in b else b["elements"][0]["text"]
            assert len(text) <= MAX_SECTION_CHARS
            assert text.count("```") % 2 == 0  # every code fence closed within its block
    blocks = [b for m in messages for b in m["blocks"]]
    codes = [b["text"]["text"] for b in blocks if b.get("text", {}).get("text", "").startswith("```")
             and "log line" not in b["text"]["text"]]  # fmt: skip
    # every command verbatim, in order, each in its own code block (the 7000-char one in pieces)
    assert "".join(unescape(c[3:-3]) for c in codes) == "".join(commands)
    labels = [
        i
        for i, b in enumerate(blocks)
        if b["type"] == "context" and CAUTION["en"] in b["elements"][0]["text"]
    ]
    assert len(labels) == 1  # only the destructive command is labelled, right above its code block
    assert unescape(blocks[labels[0] + 1]["text"]["text"]) == "```rm -rf /tmp/nccl-*```"
    text = _all_text(messages)
    assert "[1] <https://docs.example.org/kb/nccl/en/faq.md#L10-L15|Entry <1> & co>" in text
    assert f"{LABELS['en']['other_lang']}: <https://docs.example.org/kb/nccl/zh/faq.md#L90-L95|" in text
    assert "&lt;1&gt; &amp; co" in json.dumps(messages)  # Slack's control characters escaped


def test_no_match_is_a_plain_statement_with_suggestions():
    from index.search import Hit
    from kb.doors.slack.blocks import answer_messages

    hit = Hit(
        entry=_entry(2), score=0.1, dense_rank=1, lexical_rank=None, dense_score=0.3, matched_signature=None
    )
    answer = Answer(
        query="q",
        lang="zh",
        text=LABELS["zh"]["no_match"],
        commands=(),
        citations=(),
        no_match=True,
        suggestions=(hit,),
    )
    [message] = answer_messages(answer)
    text = _all_text([message])
    assert text.startswith(LABELS["zh"]["no_match"])
    assert LABELS["zh"]["suggest"] in text and "• Entry <2> & co (`nccl/en/faq.md:20-25`)" in text
    assert LABELS["zh"]["sources"] not in text and "```" not in text


def test_slack_markup_becomes_the_typed_text():
    from kb.doors.slack.plumbing import slack_to_plain

    typed = slack_to_plain(
        f"<@{BOT_USER}> see <#C1|general> &lt;hostname&gt; &amp;&amp; <https://x.org/a|the doc> ```NCCL WARN```"
    )
    assert typed == "see #general <hostname> && the doc \nNCCL WARN"


def test_split_text_closes_and_reopens_code_fences():
    from kb.doors.slack.blocks import split_text

    text = "intro\n```\n" + "\n".join(f"line {i}" for i in range(1000)) + "\n```\nafter"
    pieces = split_text(text, 500)
    assert all(len(p) <= 500 and p.count("```") % 2 == 0 for p in pieces)
    assert len(pieces) > 10 and pieces[1].startswith("```\n") and pieces[0].endswith("\n```")
    # undoing the fences added at each cut gives back the text, nothing lost or doubled
    assert "\n".join(pieces).replace("\n```\n```\n", "\n") == text


def test_links_in_answers_go_to_web_addresses_only():
    from kb.doors.slack.blocks import to_mrkdwn

    text = to_mrkdwn(
        "See [the guide](https://docs.example.org/nccl) or [urgent](!channel), [admin](@U0ADMIN), [x](!here)."
    )
    assert text == "See <https://docs.example.org/nccl|the guide> or urgent, admin, x."
    assert "<!" not in to_mrkdwn("[a|b](https://x.org/p) [y](https://x.org/a|<!channel>)")


def test_code_blocks_lose_their_language_and_keep_their_comments():
    # mrkdwn has no languages: ```bash would show (and copy) `bash` as the block's first line,
    # and a `# comment` inside a block is no heading.
    from kb.doors.slack.blocks import to_mrkdwn

    text = to_mrkdwn(
        "## Fix\nRun **this**:\n\n```bash\n# 查看版本\nexport A=<b> && x\n```\n  ````shell\n  ls\n  ````\n"
    )
    assert (
        text
        == "*Fix*\nRun *this*:\n\n```\n# 查看版本\nexport A=&lt;b&gt; &amp;&amp; x\n```\n  ````\n  ls\n  ````\n"
    )
