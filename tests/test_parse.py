"""Tests for ingest.parse: the seed documents are the spec, the corpus keeps it honest."""

from __future__ import annotations

import csv
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

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


def fence_lines(body: str) -> int:
    return sum(1 for line in body.split("\n") if line.strip().startswith(("```", "~~~")))


def by_title(sections: list[Section], prefix: str) -> Section:
    (found,) = [s for s in sections if s.title.startswith(prefix)]
    return found


# --------------------------------------------------------------------------- seed documents

SEED_000 = [
    ("进行HCCL分布式训练出错：Init plugin so failed, ret = 1343225860？", 5, 7),
    ("MindSpore执行GPU分布式训练报错如下，如何解决", 11, 23),
    (
        "GPU分布式训练场景下，若错误设置环境变量CUDA_VISIBLE_DEVICES的个数小于执行的进程数时，"
        "可能导致进程阻塞问题。",
        27,
        44,
    ),
    ("GPU分布式训练场景下，若某进程异常退出，可能导致其余进程阻塞问题。", 48, 58),
    ("在执行单机单卡的脚本时，调用communication.management.init方法可能会报错导致执行失败。", 62, 68),
]

SEED_001 = [
    (
        "What should I do if the error message Init plugin so failed, ret = 1343225860 is displayed "
        "during the HCCL distributed training?",
        5,
        7,
    ),
    (
        "In the GPU distributed training scenario, what should I do if the number of environment "
        "variables CUDA_VISIBLE_DEVICES set incorrectly is less than the number of processes executed, "
        "the process blocking problem may occur?",
        11,
        28,
    ),
    (
        "What can we do when in the GPU distributed training scenario, if a process exits abnormally, "
        "it may cause other processes to block?",
        32,
        42,
    ),
    (
        "When executing a GPU stand-alone single-card script, when the process is started without "
        "mpirun, calling the mindspore.communication.init method may report an error, resulting in "
        "execution failure, how to deal with it?",
        46,
        52,
    ),
    (
        "What can we do when performing multi-machine multi-card training via OpenMPI, the prompt "
        "fails due to MPI_Allgather?",
        56,
        77,
    ),
    (
        "What can we do when performing distributed training via OpenMPI, stand-alone multi-card "
        "training is normal, but during the multi-machine multi-card training, some machines prompt "
        "the GPU device id setting to fail?",
        81,
        92,
    ),
    (
        "What can we do when performing multi-machine multi-card training via OpenMPI, the NCCL error "
        "message displays that the network is not working?",
        96,
        108,
    ),
    (
        "What can we do when after selecting RDMA NIC with a specific name (set via NCCL_SOCKET_IFNAME) "
        "for communication for multiple machines and multiple cards, the training still reports an error?",
        112,
        126,
    ),
    (
        "What can we do when single-machine multi-card training is successful, but after expanding the "
        "script to multi-machine multi-card, other hosts prompt all kinds of errors?",
        130,
        144,
    ),
    (
        "Performing the distributed training via OpenMPI on Ascend, got HcclCommInitRootInfo error "
        "message. How can we deal it?",
        148,
        155,
    ),
    (
        "When executing a distributed network under auto_parallel, an error is reported that the tensor "
        "cannot be split by the strategy. How can we solve it?",
        159,
        165,
    ),
    (
        "What should I do if a process exits abnormally during the execution of multi-card training on a "
        "Linux environment and there is a shared memory residue through the ipcs command?",
        169,
        171,
    ),
    (
        "I try to train a small network on Ascend platform but during initializing distributed module, "
        "device memory not enough exception is still thrown. How should I solve this issue?",
        175,
        177,
    ),
    (
        "When using msrun to start a distributed framework, if I pass in the hostname as the master_addr "
        "but report an error that DNS resolution failed, how can I fix it?",
        181,
        191,
    ),
    (
        "When starting distributed framework using dynamic cluster or msrun in multi-machine scenario, "
        "an error is reported that device id is out of range. How can we solve it?",
        195,
        210,
    ),
    (
        "How to resolve Unique ID retrieval timeout failures when using dynamic cluster or msrun to "
        "launch distributed tasks with HCCL backend in multi-cards scenarios?",
        214,
        249,
    ),
]

SEED_002 = [
    ("环境验证和常见问题", 1, 3),
    ("1. 单机环境验证", 5, 7),
    ("GPU验证", 9, 68),
    ("PaddlePaddle 安装验证", 70, 98),
    ("2. 分布式环境验证", 100, 179),
    ("实际分布式训练任务验证", 181, 398),
    ("3.1 网络问题排查", 402, 404),
    ("获取节点IP", 406, 415),
    ("确认节点间是否能通过ping连接", 418, 436),
    ("确认节点间是否能通过HTTP/TCP连接", 438, 468),
    ("确认NCCL是否运行正常", 470, 503),
    ("3.2 多Python环境问题", 505, 538),
    ("3.3 自动获取 IP 错误（多网卡环境问题）", 540, 583),
    ("3.4 机器端口有限制，需要使用固定端口", 585, 608),
    ("3.5 常用的通信问题排查", 610, 612),
    ("NCCL error(5)", 614, 621),
    ("NCCL error(2)", 623, 629),
]

SEED_003 = [("多机多卡训练", 1, 120)]

SEED_004 = [
    ("构建集群", 3, 5),
    ("域名映射", 7, 44),
    ("免密登录", 46, 109),
    ("CUDA版本一致（Linux系统可以同时安装多个CUDA版本），安装时都需要和系统版本适配。", 116, 157),
    ("PyTorch版本一致", 159, 159),
    ("NCCL（ NVIDIA Collective Communication Library）版本一致", 161, 168),
    ("启动命令", 170, 172),
    ("问题避免", 174, 183),
    ("NCCL导致的报错，报错信息如下", 187, 219),
    ("训练速度比较慢，远慢于单机多卡，网线直通可能会快点，路由器带宽限制了速度。", 223, 223),
]


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


def corpus_rows() -> list[dict[str, str]]:
    with open(CORPUS / "files.tsv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="module")
def corpus_sections() -> dict[str, list[Section]]:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    return {
        str(p.relative_to(CORPUS)): parse_markdown(p.read_text(encoding="utf-8"))
        for p in sorted(CORPUS.rglob("*.md"))
        if p.name != "MANIFEST.md"
    }


@needs_corpus
def test_corpus_every_file_yields_entries(corpus_sections: dict[str, list[Section]]) -> None:
    assert len(corpus_sections) == 138
    for dest, sections in corpus_sections.items():
        assert sections, dest
        for s in sections:
            assert s.title, dest
            assert 1 <= s.start_line <= s.end_line, (dest, s.title)


@needs_corpus
def test_corpus_bodies_have_balanced_fences(corpus_sections: dict[str, list[Section]]) -> None:
    for dest, sections in corpus_sections.items():
        for s in sections:
            assert fence_lines(s.body) % 2 == 0, (dest, s.title, s.start_line)


@needs_corpus
def test_corpus_translation_pairs_have_equal_counts(corpus_sections: dict[str, list[Section]]) -> None:
    # MANIFEST: every MindSpore zh/en pair has the same number of Q markers and headings.
    pairs = (CORPUS / "pairs.tsv").read_text(encoding="utf-8").split("\n")
    pairs = [line.split("\t") for line in pairs if line.strip()]
    assert len(pairs) == 26
    for zh, en in pairs:
        assert len(corpus_sections[zh]) == len(corpus_sections[en]), (zh, en)


@needs_corpus
def test_corpus_counts_match_manifest(corpus_sections: dict[str, list[Section]]) -> None:
    manifest: dict[str, int] = defaultdict(int)
    ours: dict[str, int] = defaultdict(int)
    for row in corpus_rows():
        manifest[row["source"]] += int(row["entries_approx"])
        ours[row["source"]] += len(corpus_sections[row["dest"]])
    for source, expected in manifest.items():
        if source == "ascend_pytorch":
            continue  # its guide pages count 0 in the manifest; checked page by page below
        if source == "mindspore_error_analysis":
            # The manifest counts leaf headings only. The parser also keeps the intro text under
            # parent headings and splits "only a bullet list of problems" sections into items.
            assert expected <= ours[source] <= 2 * expected, (source, ours[source], expected)
            continue
        assert abs(ours[source] - expected) <= 0.15 * expected, (source, ours[source], expected)


@needs_corpus
def test_corpus_ascend_case_pages_are_one_entry(corpus_sections: dict[str, list[Section]]) -> None:
    for row in corpus_rows():
        if row["source"] != "ascend_pytorch" or row["entries_approx"] != "1":
            continue
        sections = corpus_sections[row["dest"]]
        assert len(sections) == 1, row["dest"]
        (page,) = sections
        assert page.start_line == 1 and page.heading_path == ()
        assert "## Solution" in page.body or "## 解决措施" in page.body


@needs_corpus
def test_corpus_no_leaf_heading_is_lost(corpus_sections: dict[str, list[Section]]) -> None:
    """Pages counted by leaf headings: each one is an entry, or the parent of its entries."""
    md = MarkdownIt("commonmark")

    def plain(s: str) -> str:
        return " ".join(s.replace("`", "").replace("*", "").split())

    for row in corpus_rows():
        if row["source"] not in ("mindspore_vllm", "mindspore_error_analysis"):
            continue
        tokens = md.parse((CORPUS / row["dest"]).read_text(encoding="utf-8"))
        headings = [
            (int(t.tag[1]), plain(tokens[i + 1].content))
            for i, t in enumerate(tokens)
            if t.type == "heading_open"
        ]
        leaves = [
            title
            for n, (level, title) in enumerate(headings)
            if level >= 2 and (n + 1 == len(headings) or headings[n + 1][0] <= level)
        ]
        sections = corpus_sections[row["dest"]]
        known = {plain(s.title) for s in sections} | {plain(p) for s in sections for p in s.heading_path}
        assert len(leaves) == int(row["entries_approx"]), row["dest"]
        for leaf in leaves:
            assert leaf in known, (row["dest"], leaf)


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


def test_crlf_and_setext_headings() -> None:
    text = "Title\r\n=====\r\n\r\nintro\r\n\r\n## Q: x?\r\n\r\ny\r\n"
    assert spans(parse_markdown(text)) == [("Title", 1, 4), ("x?", 6, 8)]


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
