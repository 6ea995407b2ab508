"""The last look at a model's answer: the code a page would show, found with a CommonMark parser
(markdown-it, as renderers read markdown), checked against the cited sources once more.

kb/verify.py's Guard reads the answer line by line as it streams, with CommonMark's rules for
fences and indented code; containers (a fence in a list item in a quote, a paragraph's lazy
continuation) are where a line reader and a renderer can still disagree. Code that the parser
finds and no cited source shows is replaced here, so what is rendered as code was verified; so
is every link whose address no cited source gives (a link's title or brackets in its text
defeated the line reader's pattern).
"""

from __future__ import annotations

import re
from collections.abc import Container

from ingest.code import PROMPT, looks_like_command, strip_prompt

from .verify import ELSEWHERE, OUTPUT_INFOS, SPAN, norm, units, unsourced_program, url_key

# What keeps a line inside its quote or list item: `> `, indentation, a list marker.
_LEAD = re.compile(r"^(?:[ \t]*>)*[ \t]*(?:(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$))?[ \t]*")
_LEAVES = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I
)  # a link to another site (a relative one stays here)
_SPAN = re.compile(SPAN.pattern, re.S)  # the answer check's inline code, here across lines too


def _runs_something(line: str, info: str, indented: bool, source_text: str) -> bool:
    s = strip_prompt(line)
    if not s or s.startswith(("#", "//")):
        return False
    if indented or info in OUTPUT_INFOS:
        return bool(PROMPT.match(line)) or looks_like_command(line) or unsourced_program(line, source_text)
    return True


def recheck(
    text: str,
    allowed: Container[str],
    marker: str,
    urls: Container[str] = (),
    link_marker: str = "",
    source_text: str = "",
) -> tuple[str, list[str]]:
    """`text` with every unverified line of code, inline command and link (to an address not in
    `urls`) that a page would show replaced by a marker; and what was replaced. `source_text`:
    the cited sources' text, where code shaped like a command may still be found."""
    from markdown_it import MarkdownIt

    lines = text.split("\n")
    removed: list[str] = []
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.map is None:
            continue
        start, stop = tok.map
        if tok.type in ("fence", "code_block"):
            info = tok.info.split()[0].lower() if tok.info.strip() else ""
            block = tok.content.split("\n")
            for first, last, joined in units(block):
                unit, code = block[first : last + 1], strip_prompt(joined)
                runs = _runs_something(unit[0], info, tok.type == "code_block", source_text)
                if runs and norm(code) not in allowed:
                    removed.append(code)
                    if not all(
                        _replace_line(lines, start, stop, ln, marker if k == 0 else "")
                        for k, ln in enumerate(unit)
                    ):
                        _blank(lines, start, stop, marker)
        elif tok.type == "inline":
            for child in tok.children or []:
                inline = child.content if child.type == "code_inline" else ""
                bad_code = looks_like_command(inline) or unsourced_program(inline, source_text)
                if bad_code and norm(strip_prompt(inline)) not in allowed:
                    removed.append(child.content)
                    if not _replace_span(lines, start, stop, child.content, marker):
                        _blank(lines, start, stop, marker)
                href = str(child.attrs.get("href", "")) if child.type == "link_open" else ""
                if link_marker and ELSEWHERE.match(href) and url_key(href) not in urls:
                    _blank(lines, start, stop, link_marker)  # a link elsewhere: its paragraph goes
    return "\n".join(lines), removed


def _replace_line(lines: list[str], start: int, stop: int, code: str, marker: str) -> bool:
    want, found = norm(code), False
    if not want:
        return True
    for i in range(start, stop):
        lead = _LEAD.match(lines[i]).group(0)  # type: ignore[union-attr]
        if norm(lines[i][len(lead) :]) == want:
            lines[i], found = (f"{lead}# {marker}" if marker else lead.rstrip() or lead), True
    return found


def _replace_span(lines: list[str], start: int, stop: int, code: str, marker: str) -> bool:
    """The inline code `code` (which may span lines of its paragraph) replaced by the marker;
    the paragraph keeps its number of lines."""
    region = "\n".join(lines[start:stop])
    new = _SPAN.sub(lambda m: marker if norm(m.group(2)) == norm(code) else m.group(0), region)
    lines[start:stop] = new.split("\n") + [""] * (region.count("\n") - new.count("\n"))
    return new != region


def _blank(lines: list[str], start: int, stop: int, marker: str) -> None:
    """The whole block or paragraph, when what it shows could not be found in its lines (the
    parser and a pattern paired backticks or brackets differently): the marker, in its container."""
    leads = [_LEAD.match(lines[i]).group(0) for i in range(start, stop)]  # type: ignore[union-attr]
    lines[start:stop] = [f"{leads[0]}{marker}", *(lead.rstrip() for lead in leads[1:])]
