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

from markdown_it import MarkdownIt

from ingest.code import close_open_fence
from ingest.entry import Section

# Only the block structure is needed for the whole document; inline markup is parsed one title
# at a time, which keeps a 10 MB paragraph cheap.
_BLOCK_MD = MarkdownIt("commonmark").enable("table").disable("inline")
_INLINE_MD = MarkdownIt("commonmark")

_MAX_TITLE = 500  # a title longer than this is cut: it is a paragraph, not a heading
_MAX_DOC_TITLE = 120  # title of a whole-document entry taken from its first line
_MAX_INLINE_SRC = 2000  # never inline-parse more than this for a title
_MAX_OPENER_CHARS = 500  # a bold "heading" paragraph longer than this is emphasis, not a title
_MAX_TRIVIAL_CHECK = 5000  # a paragraph longer than this is content, no need to look closer

_TAG_RE = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)
_BADGE_RE = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)|!\[[^\]]*\]\([^)]*\)")
_SPACE_RE = re.compile(r"\s+")
_LEFTOVER_BOLD_RE = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_MARKUP_CHARS = re.compile(r"[*_`<>\[\]!\\&~]")

# "Q:", "Q3:", "Q3.", "问题：", "Question 2:" at the start of a title.
_QUESTION_RE = re.compile(
    r"^(?:Q\d*\s*[:：]|Q\d+[.、．](?!\d)|问题\s*\d*\s*[:：]|Question\s*\d*\s*[:：])\s*", re.I
)
# Inside a bold question paragraph the colon is sometimes left out: "**Q 为何...**".
_QUESTION_LOOSE_RE = re.compile(r"^Q\d*\s+(?=\S)")
# A paragraph that is one bold span, optionally followed by a colon.
_BOLD_ONLY_RE = re.compile(r"^(\*\*|__)(?!\s)((?:(?!\1).)+?)(?<!\s)\1\s*[:：]?$", re.S)

_LIST_MARKER_RE = re.compile(r"^( {0,3})([-+*]|\d{1,9}[.)])([ \t]*)")
_BLOCK_MARKER_RE = re.compile(r"^\s*(?:(?:[-+*]|\d{1,9}[.)]|>|#{1,6})\s+)+")
_LINK_ONLY_RE = re.compile(r"^\s*(?:[-+*]\s+)?(?:\*\*)?\[[^\]]*\]\([^)]*\)(?:\*\*)?\s*$")
_SEPARATOR_RE = re.compile(r"^\s*(?:<br\s*/?>|(?:[-*_]\s*){3,})\s*$", re.I)

# Sub-headings that are parts of one problem report (matched against the whole heading text,
# numbering and a trailing colon removed).
_REPORT_PROBLEM_RE = re.compile(
    r"^(?:问题|问题描述|问题现象|问题现象描述|现象|现象描述|故障现象|报错信息|错误信息|错误关键信息|关键信息|"
    r"问题复现|复现|"
    r"复现步骤|计算环境|环境|环境信息|运行环境|软件环境|硬件环境|背景|"
    r"symptoms?|problem|problem description|issue|description|environment|reproduction|"
    r"steps to reproduce|(?:key )?error messages?|error logs?|background)$",
    re.I,
)
_REPORT_SOLUTION_RE = re.compile(
    r"^(?:原因|原因分析|可能原因|问题原因|问题分析|根因|根因分析|解决|解决方法|解决方案|解决措施|解决办法|解决思路|"
    r"处理方法|处理方案|处理措施|处理步骤|方案|方法|修复方法|规避方案|"
    r"causes?|possible causes?|root causes?|cause analysis|analysis|solutions?|fix|workaround|resolution)$",
    re.I,
)
_NUMBERING_RE = re.compile(r"^[\s\d.．、)）(（]+")


@dataclass(frozen=True)
class _Block:
    """One top-level markdown block: kind is the markdown-it token type without `_open`."""

    kind: str
    start: int  # 0-based first line
    stop: int  # 0-based line after the last
    level: int = 0  # heading level
    content: str = ""  # inline source of a heading or paragraph
    items: tuple[tuple[int, int], ...] = ()  # line ranges of a list's top-level items


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
    if not any(line.strip() for line in lines):
        return []
    blocks = _read_blocks(text)
    spans = _find_spans(blocks, lines)
    sections = [s for s in (_to_section(lines, span) for span in spans) if s is not None]
    return sections or _whole_document(lines, blocks)


def _split_lines(text: str) -> list[str]:
    # The same line breaks markdown-it normalizes, so token maps index this list.
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _find_spans(blocks: list[_Block], lines: list[str]) -> list[_Span]:
    heading_idx = [i for i, b in enumerate(blocks) if b.kind == "heading"]
    titles = [_strip_colon(_inline_text(blocks[i].content)) for i in heading_idx]

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

        if _is_question(title):
            # The answer keeps its own sub-headings, up to the next question heading.
            end = k + 1
            while end < after_subtree and not _is_question(titles[end]):
                end += 1
            spans.append(_Span(_strip_question(title), path, head.start, head.stop, line_of(end)))
            k = end
        elif _is_report(_children(blocks, heading_idx, titles, k, after_subtree)):
            spans.append(_Span(title, path, head.start, head.stop, line_of(after_subtree)))
            k = after_subtree
        else:
            next_block = heading_idx[k + 1] if k + 1 < len(heading_idx) else len(blocks)
            region = blocks[heading_idx[k] + 1 : next_block]
            spans.extend(_split_region(region, (title, head), path, line_of(k + 1), lines))
            stack.append((head.level, title))
            k += 1
    return spans


def _after_subtree(blocks: list[_Block], heading_idx: list[int], k: int) -> int:
    """Number of the first heading after k that is not nested under heading k."""
    level = blocks[heading_idx[k]].level
    j = k + 1
    while j < len(heading_idx) and blocks[heading_idx[j]].level > level:
        j += 1
    return j


def _children(blocks: list[_Block], heading_idx: list[int], titles: list[str], k: int, end: int) -> list[str]:
    """Titles of the direct sub-headings of heading k (the shallowest level below it)."""
    levels = [blocks[heading_idx[j]].level for j in range(k + 1, end)]
    top = min(levels, default=0)
    return [titles[j] for j, level in zip(range(k + 1, end), levels, strict=True) if level == top]


# --------------------------------------------------------------------------- one heading's text


def _split_region(
    region: list[_Block],
    head: tuple[str, _Block] | None,
    path: tuple[str, ...],
    region_stop: int,
    lines: list[str],
) -> list[_Span]:
    """Entries in the blocks between one heading and the next (head None: before any heading)."""
    openers = _paragraph_openers(region) or _list_openers(region, lines)
    sub_path = path + (head[0],) if head else path
    first_opener = openers[0].start if openers else region_stop
    intro = [b for b in region if b.start < first_opener]

    spans: list[_Span] = []
    if _has_content(intro):
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


def _paragraph_openers(region: list[_Block]) -> list[_Opener]:
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


def _paragraph_opener(b: _Block) -> tuple[str, _Opener] | None:
    src = b.content
    first_line = src.split("\n", 1)[0]
    # The whole paragraph as one bold span (a question or a bold "heading").
    whole = _bold_only(src) if len(src) <= _MAX_OPENER_CHARS else None
    if whole is not None:
        if _is_question(whole) or _QUESTION_LOOSE_RE.match(whole):
            return "q", _Opener(_strip_question(whole), b.start, b.stop)
        return "bold", _Opener(whole, b.start, b.stop)
    # A question on the first line, its answer following in the same paragraph.
    first = _bold_only(first_line) if len(first_line) <= _MAX_OPENER_CHARS else None
    if first is None:
        first = _inline_text(first_line)
    if _is_question(first):
        return "q", _Opener(_strip_question(first), b.start, b.start + 1)
    return None


def _bold_only(src: str) -> str | None:
    """The text of a paragraph that is exactly one bold span (HTML tags around it ignored)."""
    s = _TAG_RE.sub("", src).strip()
    m = _BOLD_ONLY_RE.match(s)
    if not m:
        return None
    title = _inline_text(m.group(2))
    return title or None


def _list_openers(region: list[_Block], lines: list[str]) -> list[_Opener]:
    """Top-level bullet items, when the text under a heading is nothing but bullet lists.

    Not for a list of one-liners (no item has more than its first line), a table of contents
    (every item is a link) or a problem told in parts ("- Symptom: ... - Solution: ...").
    """
    content = [b for b in region if not _is_trivial(b)]
    if not content or any(b.kind != "bullet_list" for b in content):
        return []
    items = [item for b in content for item in b.items]
    if len(items) < 2 or not any(_item_has_body(item, lines) for item in items):
        return []
    if all(_LINK_ONLY_RE.match(lines[start]) for start, _ in items if start < len(lines)):
        return []
    openers = [_item_opener(item, lines) for item in items if item[0] < len(lines)]
    if any(_is_report_part(op.title) for op in openers):
        return []
    return openers


def _item_has_body(item: tuple[int, int], lines: list[str]) -> bool:
    start, stop = item
    return any(line.strip() for line in lines[start + 1 : stop])


def _item_opener(item: tuple[int, int], lines: list[str]) -> _Opener:
    start, stop = item
    first = lines[start]
    m = _LIST_MARKER_RE.match(first)
    if not m:  # cannot happen for a list item's first line, but never trust that
        return _Opener(_inline_text(first), start, start + 1, stop)
    spaces = m.group(3).replace("\t", "    ")
    # Content indentation: marker plus 1-4 spaces; more than 4 means indented code, so 1.
    pad = len(spaces) if 1 <= len(spaces) <= 4 else 1
    dedent = len(m.group(1)) + len(m.group(2)) + pad
    return _Opener(_inline_text(first[m.end() :]), start, start + 1, stop, dedent)


# --------------------------------------------------------------------------- spans -> sections


def _to_section(lines: list[str], span: _Span) -> Section | None:
    end = _last_content_line(lines, span.body_start, span.stop)
    title_end = max(span.start, span.body_start - 1)
    end = max(end, title_end) if end is not None else title_end
    body_lines = lines[span.body_start : end + 1]
    if span.dedent:
        body_lines = [_dedent(line, span.dedent) for line in body_lines]
    body = "\n".join(close_open_fence(_trim_blank(body_lines)))
    title = _strip_colon(span.title) or _first_text(body_lines)
    if not title and not body:
        return None
    return Section(
        title=_cut(title, _MAX_TITLE),
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


def _whole_document(lines: list[str], blocks: list[_Block]) -> list[Section]:
    """One entry for a document in which no structure was recognized."""
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    if not nonblank:
        return []
    heading = next((b for b in blocks if b.kind == "heading"), None)
    if heading is not None:
        title, start, body_start = _inline_text(heading.content), heading.start, heading.stop
    else:
        start = nonblank[0]
        title, body_start = _line_title(lines[start]), start + 1
    title = _cut(title or lines[start].strip(), _MAX_DOC_TITLE)
    end = max(nonblank[-1], body_start - 1)
    body = "\n".join(close_open_fence(_trim_blank(lines[body_start : end + 1])))
    return [Section(title=title, heading_path=(), body=body, start_line=start + 1, end_line=end + 1)]


def _preamble_span(intro: list[_Block], lines: list[str], stop: int) -> _Span:
    """Text before the first heading: titled by its first line of text."""
    first = next(b for b in intro if not _is_trivial(b))
    line = lines[first.start] if first.start < len(lines) else ""
    title = _cut(_line_title(line) or line.strip(), _MAX_DOC_TITLE)
    if first.kind == "paragraph":
        return _Span(title, (), first.start, first.start + 1, stop)
    # A list, code block or table first: keep it whole in the body, titled by its first line.
    return _Span(title, (), first.start, first.start, stop)


# --------------------------------------------------------------------------- blocks


def _read_blocks(text: str) -> list[_Block]:
    """Top-level blocks with their line ranges, from markdown-it's block tokens."""
    tokens = _BLOCK_MD.parse(text)
    blocks: list[_Block] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.map is None or tok.nesting == -1:
            i += 1
            continue
        start, stop = tok.map
        kind = tok.type.removesuffix("_open")
        if kind in ("heading", "paragraph"):
            content = tokens[i + 1].content if i + 1 < len(tokens) else ""
            level = int(tok.tag[1:]) if kind == "heading" else 0
            blocks.append(_Block(kind, start, stop, level=level, content=content))
        elif kind in ("bullet_list", "ordered_list"):
            items, i = _list_items(tokens, i)
            blocks.append(_Block(kind, start, stop, items=items))
            continue
        else:
            # html_block keeps its source: a lone `<br/>` or comment is a separator, not content.
            content = tok.content if kind == "html_block" else ""
            blocks.append(_Block(kind, start, stop, content=content))
        i += 1
    return blocks


def _list_items(tokens: list, i: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """Line ranges of the items of the list opened at tokens[i]; returns the index after it."""
    items = []
    j = i + 1
    while j < len(tokens) and not (tokens[j].level == 0 and tokens[j].nesting == -1):
        tok = tokens[j]
        if tok.type == "list_item_open" and tok.level == 1 and tok.map:
            items.append((tok.map[0], tok.map[1]))
        j += 1
    return tuple(items), j + 1


def _has_content(blocks: list[_Block]) -> bool:
    return any(not _is_trivial(b) for b in blocks)


def _is_trivial(b: _Block) -> bool:
    """Blocks that say nothing by themselves: rules, `<br/>`, anchors, comments, badges."""
    if b.kind == "hr":
        return True
    if b.kind == "html_block":
        src = b.content
        return len(src) <= _MAX_TRIVIAL_CHECK and not _TAG_RE.sub("", src).strip()
    if b.kind == "paragraph":
        src = b.content
        return len(src) <= _MAX_TRIVIAL_CHECK and not _TAG_RE.sub("", _BADGE_RE.sub("", src)).strip()
    return False


# --------------------------------------------------------------------------- text helpers


def _inline_text(src: str) -> str:
    """Plain text of inline markdown: emphasis, code ticks, links and HTML tags dropped."""
    src = src[:_MAX_INLINE_SRC]
    if not _MARKUP_CHARS.search(src):
        return _collapse(src)
    try:
        tokens = _INLINE_MD.parseInline(src)
    except Exception:  # a title is never worth failing a document for
        return _collapse(_TAG_RE.sub(" ", src))
    out: list[str] = []
    for tok in tokens:
        for child in tok.children or ():
            if child.type in ("text", "code_inline", "image"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append(" ")
    text = _collapse("".join(out))
    if "**" in text and "\\*" not in src:
        # CommonMark does not close `**` between CJK punctuation and a letter
        # (`**NCCL（...）**版本一致`); drop such leftover pairs.
        text = _LEFTOVER_BOLD_RE.sub(r"\1", text)
    return text


def _collapse(s: str) -> str:
    return _SPACE_RE.sub(" ", s).strip()


def _cut(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def _strip_colon(title: str) -> str:
    return title.rstrip().rstrip(":：").rstrip()


def _is_question(title: str) -> bool:
    m = _QUESTION_RE.match(title)
    return m is not None and bool(title[m.end() :].strip())


def _strip_question(title: str) -> str:
    m = _QUESTION_RE.match(title) or _QUESTION_LOOSE_RE.match(title)
    return title[m.end() :].strip() if m else title


def _is_report(sub_titles: list[str]) -> bool:
    """Sub-headings that read as the parts of one problem report (symptom, cause, solution)."""
    if len(sub_titles) < 2 or any(_is_question(t) for t in sub_titles):
        return False
    parts = [_report_key(t) for t in sub_titles]
    problem = sum(1 for p in parts if _REPORT_PROBLEM_RE.match(p))
    solution = sum(1 for p in parts if _REPORT_SOLUTION_RE.match(p))
    return problem >= 1 and solution >= 1 and 2 * (problem + solution) >= len(parts)


def _is_report_part(title: str) -> bool:
    key = _report_key(title)
    return bool(_REPORT_PROBLEM_RE.match(key) or _REPORT_SOLUTION_RE.match(key))


def _report_key(title: str) -> str:
    """`1. 1 计算环境` -> `计算环境`: a sub-heading without its numbering and trailing colon."""
    return _strip_colon(_NUMBERING_RE.sub("", title))


def _line_title(line: str) -> str:
    """Text of one source line used as a title: block markers (`#`, `>`, `-`, `1.`) dropped."""
    return _inline_text(_BLOCK_MARKER_RE.sub("", line[:_MAX_INLINE_SRC]))


def _first_text(lines: list[str]) -> str:
    for line in lines:
        text = _line_title(line)
        if text:
            return _cut(text, _MAX_DOC_TITLE)
    return ""
