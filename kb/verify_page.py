"""The last look at a model's answer: the code a page would show, found with a CommonMark parser
(markdown-it, as renderers read markdown), checked against the cited sources once more.

kb/verify.py's Guard reads the answer line by line as it streams, with CommonMark's rules for
fences and indented code; containers (a fence in a list item in a quote, a paragraph's lazy
continuation) are where a line reader and a renderer can still disagree. Code that the parser
finds and no cited source shows is replaced here, so what is rendered as code was verified.
"""

from __future__ import annotations

import re
from collections.abc import Container

from ingest.code import PROMPT, looks_like_command, strip_prompt

from .verify import OUTPUT_INFOS, norm

_LEAD = re.compile(r"^[\s>]*")  # what keeps a line inside its list item or quote
_SPAN = re.compile(r"(?<!`)(`+)(?!`)([\s\S]+?)(?<!`)\1(?!`)")


def _runs_something(line: str, info: str, indented: bool) -> bool:
    s = strip_prompt(line)
    if not s or s.startswith(("#", "//")):
        return False
    if indented or info in OUTPUT_INFOS:
        return bool(PROMPT.match(line)) or looks_like_command(line)
    return True


def recheck(text: str, allowed: Container[str], marker: str) -> tuple[str, list[str]]:
    """`text` with every unverified line of code, and inline command, a page would show replaced
    by `marker`; and what was replaced."""
    from markdown_it import MarkdownIt

    lines = text.split("\n")
    removed: list[str] = []
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.map is None:
            continue
        start, stop = tok.map
        if tok.type in ("fence", "code_block"):
            info = tok.info.split()[0].lower() if tok.info.strip() else ""
            for unit in _units(tok.content.split("\n")):
                if (
                    _runs_something(unit[0], info, tok.type == "code_block")
                    and norm(strip_prompt("\n".join(unit))) not in allowed
                ):
                    removed.append(strip_prompt("\n".join(unit)))
                    for k, line in enumerate(unit):
                        _replace_line(lines, start, stop, line, marker if k == 0 else "")
        elif tok.type == "inline":
            for child in tok.children or []:
                if child.type != "code_inline" or not looks_like_command(child.content):
                    continue
                if norm(strip_prompt(child.content)) not in allowed:
                    removed.append(child.content)
                    _replace_span(lines, start, stop, child.content, marker)
    return "\n".join(lines), removed


def _units(lines: list[str]) -> list[list[str]]:
    """Logical lines of a block: a line ending in `\\` goes on in the next one."""
    units: list[list[str]] = []
    for line in lines:
        if units and units[-1][-1].rstrip().endswith("\\"):
            units[-1].append(line)
        else:
            units.append([line])
    return units


def _replace_line(lines: list[str], start: int, stop: int, code: str, marker: str) -> None:
    want = norm(code)
    for i in range(start, stop):
        lead = _LEAD.match(lines[i]).group(0)  # type: ignore[union-attr]
        if want and norm(lines[i][len(lead) :]) == want:
            lines[i] = f"{lead}# {marker}" if marker else lead.rstrip() or lead


def _replace_span(lines: list[str], start: int, stop: int, code: str, marker: str) -> None:
    """The inline code `code` (which may span lines of its paragraph) replaced by the marker;
    the paragraph keeps its number of lines."""
    region = "\n".join(lines[start:stop])
    region = _SPAN.sub(lambda m: marker if norm(m.group(2)) == norm(code) else m.group(0), region)
    new = region.split("\n")
    lines[start:stop] = new + [""] * (stop - start - len(new))
