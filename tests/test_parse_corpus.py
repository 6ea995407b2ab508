"""ingest/parse.py over the real corpus (../shared/corpus): every file yields entries, fences stay
balanced, translation pairs match, counts match the corpus manifest, no heading is lost."""

import csv
from collections import defaultdict

import pytest
from conftest import CORPUS, needs_shared
from helpers import fence_lines
from markdown_it import MarkdownIt

from ingest.entry import Section
from ingest.parse import parse_markdown


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


@needs_shared
def test_corpus_every_file_yields_entries(corpus_sections: dict[str, list[Section]]) -> None:
    assert len(corpus_sections) == 138
    for dest, sections in corpus_sections.items():
        assert sections, dest
        for s in sections:
            assert s.title, dest
            assert 1 <= s.start_line <= s.end_line, (dest, s.title)


@needs_shared
def test_corpus_bodies_have_balanced_fences(corpus_sections: dict[str, list[Section]]) -> None:
    for dest, sections in corpus_sections.items():
        for s in sections:
            assert fence_lines(s.body) % 2 == 0, (dest, s.title, s.start_line)


@needs_shared
def test_corpus_translation_pairs_have_equal_counts(corpus_sections: dict[str, list[Section]]) -> None:
    # MANIFEST: every MindSpore zh/en pair has the same number of Q markers and headings.
    pairs = (CORPUS / "pairs.tsv").read_text(encoding="utf-8").split("\n")
    pairs = [line.split("\t") for line in pairs if line.strip()]
    assert len(pairs) == 26
    for zh, en in pairs:
        assert len(corpus_sections[zh]) == len(corpus_sections[en]), (zh, en)


@needs_shared
def test_corpus_counts_match_manifest(corpus_sections: dict[str, list[Section]]) -> None:
    manifest: dict[str, int] = defaultdict(int)
    ours: dict[str, int] = defaultdict(int)
    for row in corpus_rows():
        manifest[row["source"]] += int(row["entries_approx"])
        ours[row["source"]] += len(corpus_sections[row["dest"]])
    for source, expected in manifest.items():
        if source == "ascend_pytorch":
            continue  # its guide pages count 0 in the manifest; checked page by page below
        if source in ("mindspore_error_analysis", "mindspore_lite"):
            # The manifest counts leaf headings (and lite's Q-marked items) only. The parser also
            # keeps the intro text under parent headings and splits sections that are only a
            # list of problems (bullets, or lite's numbered failures) into items.
            assert expected <= ours[source] <= 2 * expected, (source, ours[source], expected)
            continue
        assert abs(ours[source] - expected) <= 0.15 * expected, (source, ours[source], expected)


@needs_shared
def test_corpus_ascend_case_pages_are_one_entry(corpus_sections: dict[str, list[Section]]) -> None:
    for row in corpus_rows():
        if row["source"] != "ascend_pytorch" or row["entries_approx"] != "1":
            continue
        sections = corpus_sections[row["dest"]]
        assert len(sections) == 1, row["dest"]
        (page,) = sections
        assert page.start_line == 1 and page.heading_path == ()
        assert "## Solution" in page.body or "## 解决措施" in page.body


@needs_shared
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
