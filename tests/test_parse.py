"""Tests for ingest.parse: the seed documents are the spec, the corpus keeps it honest."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from helpers import fence_lines
from parse_expected import SEED_000, SEED_001, SEED_002, SEED_003, SEED_004

from ingest.entry import Section
from ingest.parse import parse_markdown

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SEEDS = SHARED / "seeds"
CORPUS = SHARED / "corpus"

needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(), reason=f"seed documents not found at {SEEDS}")
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")


def seed(prefix: str) -> str:
    (path,) = SEEDS.glob(f"{prefix}_*.txt")
    return path.read_text(encoding="utf-8")


def spans(sections: list[Section]) -> list[tuple[str, int, int]]:
    return [(s.title, s.start_line, s.end_line) for s in sections]


def by_title(sections: list[Section], prefix: str) -> Section:
    (found,) = [s for s in sections if s.title.startswith(prefix)]
    return found


# --------------------------------------------------------------------------- seed documents


@needs_seeds
@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("000", SEED_000), ("001", SEED_001), ("002", SEED_002), ("003", SEED_003), ("004", SEED_004)],
)
def test_seed_entries(prefix: str, expected: list[tuple[str, int, int]]) -> None:
    assert spans(parse_markdown(seed(prefix))) == expected


@needs_seeds
@pytest.mark.parametrize(
    ("prefix", "marker"),
    [("000", r"^<font size=3>\*\*Q[:：]"), ("001", r"^## Q:")],
)
def test_every_question_is_an_entry(prefix: str, marker: str) -> None:
    text = seed(prefix)
    q_lines = [n for n, line in enumerate(text.split("\n"), 1) if re.match(marker, line)]
    sections = parse_markdown(text)
    assert len(sections) == len(q_lines)
    assert [s.start_line for s in sections] == q_lines


@needs_seeds
def test_seed_heading_paths() -> None:
    assert {s.heading_path for s in parse_markdown(seed("000"))} == {("分布式配置",)}
    assert {s.heading_path for s in parse_markdown(seed("001"))} == {("Distributed Parallel",)}
    s002 = parse_markdown(seed("002"))
    assert by_title(s002, "环境验证和常见问题").heading_path == ()
    assert by_title(s002, "GPU验证").heading_path == ("环境验证和常见问题", "1. 单机环境验证")
    assert by_title(s002, "NCCL error(2)").heading_path == (
        "环境验证和常见问题",
        "3. FAQ",
        "3.5 常用的通信问题排查",
    )
    assert by_title(parse_markdown(seed("004")), "免密登录").heading_path == ("集群环境配置",)


@needs_seeds
def test_seed_bodies() -> None:
    s000 = parse_markdown(seed("000"))
    assert s000[0].body.startswith("A: 初始化HCCL失败了")
    assert all("<br/>" not in s.body for s in s000)  # separators dropped, not carried along

    nccl2 = by_title(parse_markdown(seed("002")), "NCCL error(2)")
    assert "```shell\nExternalError: Nccl error(2), unhandled system error\n```" in nccl2.body
    assert "--shm-size 32G" in nccl2.body
    assert not nccl2.body.startswith("**")  # the bold title line is not part of the body

    # A bold span inside a sentence opens nothing: this text stays in its section's entry.
    dist = by_title(parse_markdown(seed("002")), "2. 分布式环境验证")
    assert "请先确保**各个机器**的" in dist.body

    report = parse_markdown(seed("003"))[0]
    assert report.body.startswith("### 1. 问题")
    assert report.body.rstrip().endswith("```")
    assert "export NCCL_IB_DISABLE=1" in report.body


@needs_seeds
def test_seed_004_list_items_are_dedented_with_fences_intact() -> None:
    s004 = parse_markdown(seed("004"))
    nccl = by_title(s004, "NCCL导致的报错")
    assert "```shell\nexport NCCL_IB_DISABLE=1\nexport NCCL_SOCKET_IFNAME=eno1\n```" in nccl.body
    assert nccl.body.startswith("```shell\nTraceback (most recent call last):\n  File ")

    # Nested bullets stay inside their top-level item, one level less indented.
    login = by_title(s004, "免密登录")
    assert "\n- 验证\n\n  - 验证方式一\n" in login.body

    # The fence under the NCCL version item is never closed in the source: markdown-it ends it
    # with its list item, the body closes it, and the next item is still an entry of its own.
    version = by_title(s004, "NCCL（")
    assert version.body.endswith("torch.cuda.nccl.version()\n```")
    assert by_title(s004, "启动命令").body.startswith("在每个节点上都执行 `sh ./run.sh`")
    assert by_title(s004, "PyTorch版本一致").body == ""


@needs_seeds
def test_seed_bodies_have_balanced_fences() -> None:
    for prefix in ("000", "001", "002", "003", "004"):
        for s in parse_markdown(seed(prefix)):
            assert fence_lines(s.body) % 2 == 0, (prefix, s.title)


@needs_seeds
def test_seed_sections_are_well_formed() -> None:
    for prefix in ("000", "001", "002", "003", "004"):
        text = seed(prefix)
        lines = text.split("\n")
        for s in parse_markdown(text):
            assert 1 <= s.start_line <= s.end_line <= len(lines)
            assert lines[s.end_line - 1].strip(), "end_line is the last non-blank line"
            assert s.body == s.body.strip("\n")
            assert s.title == " ".join(s.title.split())


# --------------------------------------------------------------------------- corpus


# --------------------------------------------------------------------------- styles, synthetic


def test_question_paragraphs_full_width_colon_and_br_separators() -> None:
    text = "\n".join(
        [
            "# Doc",
            "",
            "<font size=3>**Q: first question?**</font>",
            "",
            "A: first answer.",
            "",
            "<br/>",
            "",
            "<font size=3>**Q：second question**</font>",
            "",
            "```text",
            "Error: boom",
            "```",
            "",
            "A：second answer.",
            "",
            "<br/>",
            "",
        ]
    )
    sections = parse_markdown(text)
    assert spans(sections) == [("first question?", 3, 5), ("second question", 9, 15)]
    assert sections[0].body == "A: first answer."
    assert sections[1].body == "```text\nError: boom\n```\n\nA：second answer."
    assert all(s.heading_path == ("Doc",) for s in sections)


def test_question_headings_keep_their_sub_headings() -> None:
    text = "# FAQ\n\n## Q: why?\n\n### Details\n\nbecause\n\n## Q: how?\n\nlike this\n\n## Other\n\ntext\n"
    sections = parse_markdown(text)
    assert spans(sections) == [("why?", 3, 7), ("how?", 9, 11), ("Other", 13, 15)]
    assert sections[0].body == "### Details\n\nbecause"


def test_numbered_question_headings_and_zh_marker() -> None:
    text = "## Q1: first\nanswer one\n\n## Q2: second\nanswer two\n\n##### 问题：第三个\n\n+ 答复：好\n"
    assert [s.title for s in parse_markdown(text)] == ["first", "second", "第三个"]


def test_bold_openers_only_when_alone_in_their_paragraph() -> None:
    text = "\n".join(
        [
            "### 3.5 Common errors",
            "",
            "Check **versions** first.",
            "",
            "**NCCL error(5)**",
            "",
            "cause five",
            "",
            "**Another one**:",
            "",
            "cause six",
        ]
    )
    sections = parse_markdown(text)
    assert spans(sections) == [("3.5 Common errors", 1, 3), ("NCCL error(5)", 5, 7), ("Another one", 9, 11)]
    assert sections[1].heading_path == ("3.5 Common errors",)


def test_report_document_is_one_entry() -> None:
    text = "# Link timeout\n\n## Symptom\n\nit hangs\n\n## Possible Cause\n\nfirewall\n\n## Solution\n\nopen port\n"
    assert spans(parse_markdown(text)) == [("Link timeout", 1, 13)]


def test_report_parts_under_several_problems_split_per_problem() -> None:
    text = "# Cases\n\n## A fails\n\n### Symptom\n\na\n\n### Solution\n\nfix a\n\n## B fails\n\n### Symptom\n\nb\n\n### Solution\n\nfix b\n"
    sections = parse_markdown(text)
    assert spans(sections) == [("A fails", 3, 11), ("B fails", 13, 21)]
    assert sections[0].heading_path == ("Cases",)


def test_bullet_items_are_entries_with_nested_lists_and_dedent() -> None:
    text = "\n".join(
        [
            "#### Notes",
            "",
            "- First topic",
            "",
            "  ```shell",
            "  echo hi",
            "  ```",
            "",
            "  - nested point",
            "    - deeper",
            "",
            "- Second topic",
            "",
            "  text",
        ]
    )
    sections = parse_markdown(text)
    assert spans(sections) == [("First topic", 3, 10), ("Second topic", 12, 14)]
    assert sections[0].body == "```shell\necho hi\n```\n\n- nested point\n  - deeper"
    assert sections[1].heading_path == ("Notes",)


def test_one_liner_lists_and_link_lists_are_not_split() -> None:
    assert len(parse_markdown("## Links\n\n- [a](a.md)\n- [b](b.md)\n  - [c](c.md)\n")) == 1
    assert len(parse_markdown("## Facts\n\n- one\n- two\n- three\n")) == 1


def test_unclosed_fence_in_list_item_is_closed_in_body() -> None:
    text = "## Setup\n\n- Versions\n\n  ```python\n  import torch\n\n- Launch\n\n  run it\n"
    sections = parse_markdown(text)
    assert spans(sections) == [("Versions", 3, 6), ("Launch", 8, 10)]
    assert sections[0].body == "```python\nimport torch\n```"


def test_unclosed_top_level_fence_runs_to_the_end_and_is_closed() -> None:
    sections = parse_markdown("# T\n\n```\ncode\n# not a heading\n")
    assert spans(sections) == [("T", 1, 5)]
    assert sections[0].body == "```\ncode\n# not a heading\n```"


def test_document_without_structure_is_one_entry() -> None:
    long_line = "word " * 100
    (only,) = parse_markdown(f"\n{long_line}\nsecond line\n")
    assert only.start_line == 2 and only.end_line == 3
    assert len(only.title) <= 120 and only.title.startswith("word word")
    assert only.body == "second line"

    (heading_only,) = parse_markdown("# Just a title\n")
    assert spans([heading_only]) == [("Just a title", 1, 1)]


def test_badges_and_separators_are_not_entries() -> None:
    text = "# Page\n\n[![Source](https://x/y.svg)](https://x/y.md)\n\n<br/>\n\n## Q: real?\n\nyes\n"
    assert spans(parse_markdown(text)) == [("real?", 7, 9)]


def test_html_comments_are_left_out_of_bodies_and_lines_still_count() -> None:
    # Translated pages carry a stamp under their title; FAQs leave TODO notes between items.
    text = (
        "# HCCL init timeout\n\n<!-- translation-stamp commit=abc123 at=2026-01-02T03:04:05Z -->\n\n"
        "Raise HCCL_CONNECT_TIMEOUT.\n\n```bash\nexport HCCL_CONNECT_TIMEOUT=1800\n```\n"
    )
    [entry] = parse_markdown(text)
    assert "<!--" not in entry.body and "translation-stamp" not in entry.body
    assert entry.body.startswith("Raise HCCL_CONNECT_TIMEOUT.") and (entry.start_line, entry.end_line) == (
        1,
        9,
    )
    items = "- Q one?\n\n  yes\n\n<!--\nTODO: more here\n-->\n\n- Q two?\n\n  no\n"
    assert [(s.title, s.start_line, "TODO" in s.body) for s in parse_markdown(items)] == [
        ("Q one?", 1, False),
        ("Q two?", 9, False),
    ]
    # In a code block a comment is code, and stays.
    [entry] = parse_markdown("# Page\n\n## Q: html?\n\n```html\n<!-- keep -->\n```\n")
    assert "<!-- keep -->" in entry.body


def test_front_matter_is_no_entry_and_lines_still_count() -> None:
    # Jekyll, Hugo and MkDocs pages start with YAML between two `---` lines: to markdown-it a
    # rule and a setext heading, so a page of front matter alone was one entry titled by it.
    page = "---\ntitle: Ports\ntags:\n  - paddle\n  - nccl\n---\n\n## Q: Which ports does a Paddle job use?\n\nA: 6170 up.\n"
    assert spans(parse_markdown(page)) == [("Which ports does a Paddle job use?", 8, 10)]
    assert parse_markdown("---\ntitle: only front matter\ntags: [a, b]\n---\n") == []
    # Prose between two rules is no front matter: it stays the page.
    assert "NCCL hangs" in parse_markdown("---\nNCCL hangs at init, set NCCL_SOCKET_IFNAME.\n---\n")[0].title


def test_crlf_and_setext_headings() -> None:
    text = "Title\r\n=====\r\n\r\nintro\r\n\r\n### Q: x?\r\n\r\ny\r\n## Setup\r\n\r\nrun it\r\n"
    assert spans(parse_markdown(text)) == [("x?", 6, 8), ("Setup", 9, 11)]


def test_a_page_title_and_its_overview_are_no_entry() -> None:
    # "# NCCL errors" and a sentence on what the page covers came back as a hit ("lines 1-3").
    text = "# NCCL errors\n\nWhat this page covers.\n\n## Q: x?\n\ny\n"
    assert spans(parse_markdown(text)) == [("x?", 5, 7)]
    # A title whose text is more than an overview (a command) stays an entry.
    text = "# Setup\n\nRun this:\n\n```bash\nexport A=1\n```\n\n## Q: x?\n\ny\n"
    assert spans(parse_markdown(text))[0][0] == "Setup"


# --------------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t\n  ",
        "```python\nnever closed\n# heading inside\n",
        "x" * 2_000_000,
        "".join("  " * i + f"- item {i}\n" for i in range(200)),
        "".join(" " * (4 * i) + f"* item {i}\n" for i in range(200)),
        "<div>\n" * 2000 + "<table><tr><td>x</td></tr></table>\n<br/>\n<!-- c -->\n" * 500,
        ">" * 5000 + " deep quote\n",
        "[" * 50_000 + "]" * 50_000,
        "**" * 20_000,
        "# \n## \n### Q:\n\x00\x00\n",
        "\u2028\u2029\x0b\x0c\x1c\n- \n1.\n> \n",
    ],
    ids=[
        "empty",
        "whitespace",
        "unclosed-fence",
        "2mb-line",
        "200-deep-list",
        "200-deep-list-4",
        "html-heavy",
        "deep-quote",
        "brackets",
        "stars",
        "empty-headings",
        "odd-separators",
    ],
)
def test_any_input_returns_a_list(text: str) -> None:
    started = time.perf_counter()
    result = parse_markdown(text)
    assert isinstance(result, list)
    assert all(isinstance(s, Section) for s in result)
    assert all(fence_lines(s.body) % 2 == 0 for s in result)
    assert time.perf_counter() - started < 5
    if not text.strip():
        assert result == []
    else:
        assert result
