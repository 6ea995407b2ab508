"""Markdown FAQ text -> Sections, one per question or problem.

The structure comes from markdown-it-py block tokens and their `.map` line ranges, so an entry
boundary is always the start of a top-level block: never inside a fenced code block, and never
a character count. The styles met in real FAQ pages, strongest signal first:

1. Question headings (`## Q: ...`, `### Q3: ...`, `##### 问题：...`): one entry each, running to the
   next heading of the same or a higher level or to the next question heading.
2. Problem reports: a heading whose sub-headings are report parts (symptom / cause / solution,
   问题 / 原因 / 解决方法 ...) is one entry covering all of them.
3. Inside the text under a heading, paragraphs open entries of their own: question paragraphs
   (`<font size=3>**Q: ...**</font>`) first; otherwise paragraphs that are a single bold span
   (`**NCCL error(2)**`).
4. A heading whose text is only a bullet list: each top-level item is an entry (title = the
   item's first line, body = the rest of the item, dedented).
5. Otherwise a heading with real content under it (not just badges or `<br/>`) is an entry.

A document where none of these finds anything, but which has text, is one entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingest.blocks import Block, front_matter_stop, has_content, is_comment, is_trivial, read_blocks
from ingest.code import close_open_fence
from ingest.entry import Section
from ingest.titles import (
    MAX_DOC_TITLE,
    QUESTION_LOOSE_RE,
    TAG_RE,
    cut,
    first_text,
    inline_text,
    is_question,
    is_report,
    is_report_part,
    line_title,
    names_a_problem,
    strip_colon,
    strip_question,
)

_MAX_TITLE = 500  # a title longer than this is cut: it is a paragraph, not a heading
_MAX_OPENER_CHARS = 500  # a bold "heading" paragraph longer than this is emphasis, not a title


# A paragraph that is one bold span, optionally followed by a colon.
_BOLD_ONLY_RE = re.compile(r"^(\*\*|__)(?!\s)((?:(?!\1).)+?)(?<!\s)\1\s*[:：]?$", re.S)

_LIST_MARKER_RE = re.compile(r"^( {0,3})([-+*]|\d{1,9}[.)])([ \t]*)")
_LINK_ONLY_RE = re.compile(r"^\s*(?:[-+*]\s+)?(?:\*\*)?\[[^\]]*\]\([^)]*\)(?:\*\*)?\s*$")
_SEPARATOR_RE = re.compile(r"^\s*(?:<br\s*/?>|(?:[-*_]\s*){3,})\s*$", re.I)


@dataclass(frozen=True)
class _Span:
    """An entry before its body is cut out of the source lines."""

    title: str
    path: tuple[str, ...]
    start: int  # 0-based line of the title
    body_start: int  # 0-based first line of the body
    stop: int  # 0-based line after the last that may belong to the entry
    dedent: int = 0  # spaces of list-item indentation to remove from body lines


@dataclass(frozen=True)
class _Opener:
    """A paragraph or list item that opens an entry inside the text under a heading."""

    title: str
    start: int
    body_start: int
    stop: int | None = None  # list items end on their own; paragraphs run to the next opener
    dedent: int = 0


def parse_markdown(text: str) -> list[Section]:
    """Split one markdown document into its entries (see the module docstring for the styles)."""
    try:
        return _parse(text)
    except Exception:  # ingestion of a whole corpus must not stop at one odd file
        pass
    try:
        return _whole_document(_split_lines(text), blocks=[])
    except Exception:
        return []


# --------------------------------------------------------------------------- driver


def _parse(text: str) -> list[Section]:
    lines = _split_lines(text)
    front = front_matter_stop(lines)
    if front:  # blanked, so that line numbers still point into the file
        lines[:front] = [""] * front
        text = "\n".join(lines)
    if not any(line.strip() for line in lines):
        return []
    blocks = read_blocks(text)
    for b in blocks:
        if is_comment(b):  # never answer text; blanked so that line numbers still point into the file
            lines[b.start : b.stop] = [""] * (b.stop - b.start)
    spans = _find_spans(blocks, lines)
    sections = [s for s in (_to_section(lines, span) for span in spans) if s is not None]
    return sections or _whole_document(lines, blocks)


def _split_lines(text: str) -> list[str]:
    # The same line breaks markdown-it normalizes, so token maps index this list.
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _find_spans(blocks: list[Block], lines: list[str]) -> list[_Span]:
    heading_idx = [i for i, b in enumerate(blocks) if b.kind == "heading"]
    titles = [strip_colon(inline_text(blocks[i].content)) for i in heading_idx]

    def line_of(k: int) -> int:
        """First line of heading number k; past the last heading, the end of the document."""
        return blocks[heading_idx[k]].start if k < len(heading_idx) else len(lines)

    first_block = heading_idx[0] if heading_idx else len(blocks)
    spans = _split_region(blocks[:first_block], None, (), line_of(0), lines)

    stack: list[tuple[int, str]] = []  # (level, title) of the enclosing headings
    k = 0
    while k < len(heading_idx):
        head = blocks[heading_idx[k]]
        while stack and stack[-1][0] >= head.level:
            stack.pop()
        path = tuple(t for _, t in stack)
        title = titles[k]
        after_subtree = _after_subtree(blocks, heading_idx, k)

        if is_question(title):
            # The answer keeps its own sub-headings, up to the next question heading.
            end = k + 1
            while end < after_subtree and not is_question(titles[end]):
                end += 1
            spans.append(_Span(strip_question(title), path, head.start, head.stop, line_of(end)))
            k = end
        elif is_report(_children(blocks, heading_idx, titles, k, after_subtree)):
            spans.append(_Span(title, path, head.start, head.stop, line_of(after_subtree)))
            k = after_subtree
        else:
            next_block = heading_idx[k + 1] if k + 1 < len(heading_idx) else len(blocks)
            region = blocks[heading_idx[k] + 1 : next_block]
            has_children = head.level == 1 and after_subtree > k + 1  # a page's title and its overview
            spans.extend(_split_region(region, (title, head), path, line_of(k + 1), lines, has_children))
            stack.append((head.level, title))
            k += 1
    return spans


def _after_subtree(blocks: list[Block], heading_idx: list[int], k: int) -> int:
    """Number of the first heading after k that is not nested under heading k."""
    level = blocks[heading_idx[k]].level
    j = k + 1
    while j < len(heading_idx) and blocks[heading_idx[j]].level > level:
        j += 1
    return j


def _children(blocks: list[Block], heading_idx: list[int], titles: list[str], k: int, end: int) -> list[str]:
    """Titles of the direct sub-headings of heading k (the shallowest level below it)."""
    levels = [blocks[heading_idx[j]].level for j in range(k + 1, end)]
    top = min(levels, default=0)
    return [titles[j] for j, level in zip(range(k + 1, end), levels, strict=True) if level == top]


# --------------------------------------------------------------------------- one heading's text


def _split_region(
    region: list[Block],
    head: tuple[str, Block] | None,
    path: tuple[str, ...],
    region_stop: int,
    lines: list[str],
    has_children: bool = False,
) -> list[_Span]:
    """Entries in the blocks between one heading and the next (head None: before any heading).
    A heading with entries under it whose own text is only a short overview ("# NCCL errors" and
    a sentence on what the page covers) is no entry: it answers nothing and came back as a hit."""
    openers = _paragraph_openers(region) or _list_openers(region, lines)
    sub_path = path + (head[0],) if head else path
    first_opener = openers[0].start if openers else region_stop
    intro = [b for b in region if b.start < first_opener]

    spans: list[_Span] = []
    if has_content(intro) and not (head and has_children and _is_overview(intro)):
        if head:
            title, block = head
            spans.append(_Span(title, path, block.start, block.stop, first_opener))
        else:
            spans.append(_preamble_span(intro, lines, first_opener))
    for n, op in enumerate(openers):
        if op.stop is not None:
            stop = op.stop
        else:
            stop = openers[n + 1].start if n + 1 < len(openers) else region_stop
        spans.append(_Span(op.title, sub_path, op.start, op.body_start, stop, op.dedent))
    return spans


OVERVIEW_MAX_PARAGRAPHS = 3  # a page's introduction, not an answer (counted, not measured: zh is shorter)


def _is_overview(intro: list[Block]) -> bool:
    text = [b for b in intro if not is_trivial(b)]
    return all(b.kind == "paragraph" for b in text) and len(text) <= OVERVIEW_MAX_PARAGRAPHS


def _paragraph_openers(region: list[Block]) -> list[_Opener]:
    """Question paragraphs if there are any, otherwise paragraphs that are only a bold span."""
    questions: list[_Opener] = []
    bolds: list[_Opener] = []
    for b in region:
        if b.kind != "paragraph":
            continue
        found = _paragraph_opener(b)
        if found is None:
            continue
        kind, opener = found
        (questions if kind == "q" else bolds).append(opener)
    return questions or bolds


def _paragraph_opener(b: Block) -> tuple[str, _Opener] | None:
    src = b.content
    first_line = src.split("\n", 1)[0]
    # The whole paragraph as one bold span (a question or a bold "heading").
    whole = _bold_only(src) if len(src) <= _MAX_OPENER_CHARS else None
    if whole is not None:
        if is_question(whole) or QUESTION_LOOSE_RE.match(whole):
            return "q", _Opener(strip_question(whole), b.start, b.stop)
        return "bold", _Opener(whole, b.start, b.stop)
    # A question on the first line, its answer following in the same paragraph.
    first = _bold_only(first_line) if len(first_line) <= _MAX_OPENER_CHARS else None
    if first is None:
        first = inline_text(first_line)
    if is_question(first):
        return "q", _Opener(strip_question(first), b.start, b.start + 1)
    return None


def _bold_only(src: str) -> str | None:
    """The text of a paragraph that is exactly one bold span (HTML tags around it ignored)."""
    s = TAG_RE.sub("", src).strip()
    m = _BOLD_ONLY_RE.match(s)
    if not m:
        return None
    title = inline_text(m.group(2))
    return title or None


def _list_openers(region: list[Block], lines: list[str]) -> list[_Opener]:
    """Top-level list items, when the text under a heading is nothing but lists.

    Not for a list of one-liners (no item has more than its first line), a table of contents
    (every item is a link) or a problem told in parts ("- Symptom: ... - Solution: ...").
    """
    content = [b for b in region if not is_trivial(b)]
    if not content or any(b.kind not in ("bullet_list", "ordered_list") for b in content):
        return []
    items = [item for b in content for item in b.items]
    if len(items) < 2 or not any(_item_has_body(item, lines) for item in items):
        return []
    if all(_LINK_ONLY_RE.match(lines[start]) for start, _ in items if start < len(lines)):
        return []
    openers = [_item_opener(item, lines) for item in items if item[0] < len(lines)]
    if any(is_report_part(op.title) for op in openers):
        return []
    if any(b.kind == "ordered_list" for b in content) and not _numbered_problems(openers, items, lines):
        return []
    return openers


_BOLD_LINE_RE = re.compile(r"^\s*\d{1,9}[.)]\s+\*\*.+\*\*[\s:：]*$")


def _numbered_problems(openers: list[_Opener], items: list[tuple[int, int]], lines: list[str]) -> bool:
    """A numbered list is usually the steps of one procedure ("1. Set ... 2. Run ..."); it is a
    list of problems when every item names one ("1. The model file is incompatible ... error"),
    or when every item opens with a bold line and most of them name one (the mindspore_lite
    FAQ and team FAQs number their known problems so)."""
    named = sum(names_a_problem(op.title) for op in openers)
    if named == len(openers):
        return True
    bold = all(_BOLD_LINE_RE.match(lines[start]) for start, _ in items if start < len(lines))
    return bold and named * 2 >= len(openers)


def _item_has_body(item: tuple[int, int], lines: list[str]) -> bool:
    start, stop = item
    return any(line.strip() for line in lines[start + 1 : stop])


def _item_opener(item: tuple[int, int], lines: list[str]) -> _Opener:
    start, stop = item
    first = lines[start]
    m = _LIST_MARKER_RE.match(first)
    if not m:  # cannot happen for a list item's first line, but never trust that
        return _Opener(inline_text(first), start, start + 1, stop)
    spaces = m.group(3).replace("\t", "    ")
    # Content indentation: marker plus 1-4 spaces; more than 4 means indented code, so 1.
    pad = len(spaces) if 1 <= len(spaces) <= 4 else 1
    dedent = len(m.group(1)) + len(m.group(2)) + pad
    return _Opener(inline_text(first[m.end() :]), start, start + 1, stop, dedent)


# --------------------------------------------------------------------------- spans -> sections


def _to_section(lines: list[str], span: _Span) -> Section | None:
    end = _last_content_line(lines, span.body_start, span.stop)
    title_end = max(span.start, span.body_start - 1)
    end = max(end, title_end) if end is not None else title_end
    body_lines = lines[span.body_start : end + 1]
    if span.dedent:
        body_lines = [_dedent(line, span.dedent) for line in body_lines]
    body = "\n".join(close_open_fence(_trim_blank(body_lines)))
    title = strip_colon(span.title) or first_text(body_lines)
    if not title and not body:
        return None
    return Section(
        title=cut(title, _MAX_TITLE),
        heading_path=span.path,
        body=body,
        start_line=span.start + 1,
        end_line=end + 1,
    )


def _last_content_line(lines: list[str], start: int, stop: int) -> int | None:
    """Last line in [start, stop) that is neither blank nor a `<br/>` / rule separator."""
    for i in range(min(stop, len(lines)) - 1, start - 1, -1):
        line = lines[i]
        if line.strip() and not _SEPARATOR_RE.match(line):
            return i
    return None


def _trim_blank(lines: list[str]) -> list[str]:
    lo, hi = 0, len(lines)
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return lines[lo:hi]


def _dedent(line: str, width: int) -> str:
    n = len(line) - len(line.lstrip(" "))
    return line[min(n, width) :]


def _whole_document(lines: list[str], blocks: list[Block]) -> list[Section]:
    """One entry for a document in which no structure was recognized."""
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    if not nonblank:
        return []
    heading = next((b for b in blocks if b.kind == "heading"), None)
    if heading is not None:
        title, start, body_start = inline_text(heading.content), heading.start, heading.stop
    else:
        start = nonblank[0]
        title, body_start = line_title(lines[start]), start + 1
    title = cut(title or lines[start].strip(), MAX_DOC_TITLE)
    end = max(nonblank[-1], body_start - 1)
    body = "\n".join(close_open_fence(_trim_blank(lines[body_start : end + 1])))
    return [Section(title=title, heading_path=(), body=body, start_line=start + 1, end_line=end + 1)]


def _preamble_span(intro: list[Block], lines: list[str], stop: int) -> _Span:
    """Text before the first heading: titled by its first line of text."""
    first = next(b for b in intro if not is_trivial(b))
    line = lines[first.start] if first.start < len(lines) else ""
    title = cut(line_title(line) or line.strip(), MAX_DOC_TITLE)
    if first.kind == "paragraph":
        return _Span(title, (), first.start, first.start + 1, stop)
    # A list, code block or table first: keep it whole in the body, titled by its first line.
    return _Span(title, (), first.start, first.start, stop)


# --------------------------------------------------------------------------- blocks


# --------------------------------------------------------------------------- text helpers
