"""A markdown document's top-level blocks with their line ranges (markdown-it block tokens),
which the parser (ingest/parse.py) cuts into entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

from .titles import TAG_RE

# Only the block structure is needed for the whole document; inline markup is parsed one title
# at a time, which keeps a 10 MB paragraph cheap.
_BLOCK_MD = MarkdownIt("commonmark").enable("table").disable("inline")
_MAX_TRIVIAL_CHECK = 5000  # a paragraph longer than this is content, no need to look closer
_BADGE_RE = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)|!\[[^\]]*\]\([^)]*\)")


@dataclass(frozen=True)
class Block:
    """One top-level markdown block: kind is the markdown-it token type without `_open`."""

    kind: str
    start: int  # 0-based first line
    stop: int  # 0-based line after the last
    level: int = 0  # heading level
    content: str = ""  # inline source of a heading or paragraph
    items: tuple[tuple[int, int], ...] = ()  # line ranges of a list's top-level items


def read_blocks(text: str) -> list[Block]:
    """Top-level blocks with their line ranges, from markdown-it's block tokens."""
    tokens = _BLOCK_MD.parse(text)
    blocks: list[Block] = []
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
            blocks.append(Block(kind, start, stop, level=level, content=content))
        elif kind in ("bullet_list", "ordered_list"):
            items, i = _list_items(tokens, i)
            blocks.append(Block(kind, start, stop, items=items))
            continue
        else:
            # html_block keeps its source: a lone `<br/>` or comment is a separator, not content.
            content = tok.content if kind == "html_block" else ""
            blocks.append(Block(kind, start, stop, content=content))
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


_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)


# YAML front matter (Jekyll, Hugo, MkDocs, Docusaurus pages start with it): `key: value` lines, list
# items and indented lines between two `---` lines. To markdown-it it is a rule and a setext
# heading, so a page of front matter alone became an entry titled `title: ... tags: [a, b]`.
_YAML_LINE = re.compile(r"^(\s+\S|[\w.-]+\s*:(\s|$)|-\s|#)")
_FRONT_MATTER_MAX_LINES = 200


def front_matter_stop(lines: list[str]) -> int:
    """The line after the front matter at the top of a page, 0 when there is none."""
    if not lines or lines[0].strip() != "---":
        return 0
    for i in range(1, min(len(lines), _FRONT_MATTER_MAX_LINES)):
        s = lines[i].strip()
        if s in ("---", "..."):
            return i + 1 if i > 1 else 0
        if s and not _YAML_LINE.match(lines[i]):
            return 0
    return 0


def is_comment(b: Block) -> bool:
    """An HTML comment block: a note to the document's editors (a translation stamp, a TODO)."""
    return (
        b.kind == "html_block"
        and b.content.lstrip().startswith("<!--")
        and not _COMMENT_RE.sub("", b.content).strip()
    )


def has_content(blocks: list[Block]) -> bool:
    return any(not is_trivial(b) for b in blocks)


def is_trivial(b: Block) -> bool:
    """Blocks that say nothing by themselves: rules, `<br/>`, anchors, comments, badges."""
    if b.kind == "hr":
        return True
    if b.kind == "html_block":
        src = b.content
        return len(src) <= _MAX_TRIVIAL_CHECK and not TAG_RE.sub("", src).strip()
    if b.kind == "paragraph":
        src = b.content
        return len(src) <= _MAX_TRIVIAL_CHECK and not TAG_RE.sub("", _BADGE_RE.sub("", src)).strip()
    return False
