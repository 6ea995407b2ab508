"""The part of an entry an answer shows: its answering text without illustrative output, a fix in
code a sentence introduces, the code of an entry that is only code, and, for a closest entry (not
a match), the same text with its commands left in the source. Shortened at block boundaries.
"""

from __future__ import annotations

import re

from index.views import answer_text
from ingest.code import FENCE_OPEN, INLINE_CODE, PROMPT, closes, looks_like_command, segments
from ingest.entry import Entry
from ingest.signals import commands

from .labels import LABELS

_SHELL_INFO = ("bash", "shell", "sh", "console", "zsh")


INTRODUCED_BLOCK_LINES = 3  # a block this short after "…is:" is what the sentence shows
# Code someone puts into their script or config: a fix of this many lines is the answer itself.
INTRODUCED_CODE_LINES = 15
_SOURCE_INFO = frozenset("python py yaml yml json toml ini cfg conf cpp c c++ cuda".split())


def _prose_and_command_blocks(body: str, lang: str = "en") -> str:
    """The body without illustrative output: prose plus the shell blocks that hold commands,
    so a sentence ending in "run this:" keeps what it introduces. A block of source code or
    configuration that a sentence ending in a colon introduces is kept up to INTRODUCED_CODE_LINES
    ("In your script:" then the four lines of the fix); any other block (a log, a listing) only
    when it is a line or three ("whose last log line is:"). What is left out says where it is
    when a sentence points at it, or when it is code (a fix is never dropped without a word); a
    healthy log nobody introduced goes silently. An unclosed block is dropped."""
    out: list[str] = []
    segs = list(segments(body))
    if not any(ln.strip() for seg in segs if not seg.code for ln in seg.lines):
        return ""  # only code: key_text shows it (_code_only)
    for seg in segs:
        if not seg.code:
            out.extend(seg.lines)
            continue
        closed = _closed_fence(seg)
        holds_commands = seg.info in _SHELL_INFO and any(commands("\n".join(seg.lines)))
        introduced = next((ln.rstrip() for ln in reversed(out) if ln.strip()), "").endswith((":", "："))
        is_code = seg.info in _SHELL_INFO or seg.info in _SOURCE_INFO
        shown = INTRODUCED_CODE_LINES if seg.info in _SOURCE_INFO else INTRODUCED_BLOCK_LINES
        if closed and (holds_commands or (introduced and len(seg.lines) - 2 <= shown)):
            out.extend(seg.lines)
        elif introduced or is_code:  # "the expected output is:" would point at nothing
            out.append(LABELS.get(lang, LABELS["en"])["in_source"])
    return "\n".join(out)


# Real HTML tags only (`<br/>`, `<font size=3>`): `<hostname>` or `<image>` in a command is a
# placeholder the reader must see.
_HTML_TAG = re.compile(
    r"</?(br|font|a|img|p|div|span|b|i|u|strong|em|sup|sub|details|summary|center|table|tr|td|th|"
    r"ul|ol|li|hr|h[1-6])\b[^<>]*/?>",
    re.I,
)


# "A:", "**A：**", "答：": where the answer starts (the question above it is the title).
_ANSWER_LABEL = re.compile(r"(?m)^\s*(?:(\*\*|__)(?:A|答)\s*[:：]\s*\1|(?:A|答)\s*[:：])[ \t]*")

ANSWER_CHARS = 1500  # the extractive answer's text; the rest of the entry is one click away


def key_text(entry: Entry, limit: int = ANSWER_CHARS) -> str:
    """The part of an entry that answers: the text after `A:` when there is one, else all of it,
    without illustrative output. A long one is shortened at block boundaries (never inside a
    code block, so every fence it opens it closes) and says that the rest is in the source."""
    text = _prose_and_command_blocks(entry.body, entry.lang)
    m = _ANSWER_LABEL.search(text)
    if m:
        text = text[m.end() :]
    lines = [ln.rstrip() for ln in text.split("\n")]
    cleaned = "\n".join(ln for ln in lines if ln.strip() not in ("<br/>", "<br>"))
    cleaned = _HTML_TAG.sub("", cleaned).strip()
    if not cleaned:
        cleaned = answer_text(entry, limit) or _code_only(entry.body)
    cleaned = re.sub(r"\n{3,}", "\n\n", cleaned)
    if len(cleaned) <= limit:
        return cleaned
    more = LABELS.get(entry.lang, LABELS["en"])["more"]
    short = _shorten(cleaned, limit)
    # A first block too long to show whole: no half of a fence, only the pointer to the source.
    return (
        more if short.lstrip().startswith(("```", "~~~")) and short.endswith(" …") else f"{short}\n\n{more}"
    )


def _code_only(body: str) -> str:
    """The closed code blocks of an entry that says nothing else (a snippet, a loop, a hostfile):
    there the code is the answer, whatever its language (it was left out as illustration, and
    the answer said the entry had no more than its title)."""
    return "\n\n".join("\n".join(seg.lines) for seg in segments(body) if seg.code and _closed_fence(seg))


def _closed_fence(seg) -> bool:
    """A fenced block (not four-space code) whose fence closes: one that can be shown whole."""
    opening = FENCE_OPEN.match(seg.lines[0])
    return len(seg.lines) > 1 and opening is not None and closes(seg.lines[-1], opening.group(2))


def without_code(text: str, lang: str) -> str:
    """A weak match's text: its code left in the source, commands in its sentences too (``run
    `sudo ln -sf ...` ``, an indented `apt install ...`); only a quoted log line stays. A block
    left out leaves a marker in its place: "... then relaunch:" followed by the next paragraph
    read as a broken page."""
    kept, withheld = [], False
    here = LABELS[lang]["commands_here"]
    for block in _blocks(text):
        if FENCE_OPEN.match(block):
            if _quotes_output(block):
                kept.append(block)
            else:
                withheld = True
                if not kept or kept[-1] != here:
                    kept.append(here)
            continue
        lines: list[str] = []
        for line in block.split("\n"):
            if (line.startswith((" " * 4, "\t")) or PROMPT.match(line)) and looks_like_command(line.strip()):
                withheld = True  # an indented block's or a prompted command; prose and tables stay
                if not lines or lines[-1] != here:
                    lines.append(here)
                continue
            shown = INLINE_CODE.sub(
                lambda m: LABELS[lang]["command"] if looks_like_command(m.group(1)) else m.group(0), line
            )
            withheld = withheld or shown != line
            lines.append(shown)
        if any(ln.strip() for ln in lines) and not (lines == [here] and kept and kept[-1] == here):
            kept.append("\n".join(lines))
    if withheld:
        kept.append(LABELS[lang]["code_in_source"])
    return "\n\n".join(kept)


_OUTPUT_INFO = ("", "text", "txt", "log", "output", "plaintext")


def _quotes_output(block: str) -> bool:
    """A fenced block that shows output (a log line), not code or commands to run."""
    m = FENCE_OPEN.match(block)
    if m is None or m.group(3).lower() not in _OUTPUT_INFO:
        return False
    # Line by line: commands() reads a block that is mostly output as output, commands and all.
    lines = [PROMPT.sub("", ln).lstrip("+ ") for ln in block.splitlines()[1:-1]]
    return not any(looks_like_command(ln) for ln in lines)  # a destructive one included


def _blocks(text: str) -> list[str]:
    """Paragraphs and whole fenced blocks, in order."""
    out: list[str] = []
    for seg in segments(text):
        if seg.code:
            out.append("\n".join(seg.lines))
        else:
            # A paragraph next to a fence keeps the fence's blank line: trimmed, so that
            # joining blocks with one blank line gives one blank line.
            out += [p.strip("\n") for p in re.split(r"\n\s*\n", "\n".join(seg.lines)) if p.strip()]
    return out


def _shorten(text: str, limit: int) -> str:
    """Whole blocks up to `limit`; a paragraph that does not fit is cut after a sentence when
    enough of it fits, a code block never."""
    kept: list[str] = []
    used = 0
    for block in _blocks(text):
        if used + len(block) <= limit:
            kept.append(block)
            used += len(block) + 2
            continue
        if not FENCE_OPEN.match(block) and limit - used > 200:
            cut = block[: limit - used]
            stop = max(cut.rfind("。"), cut.rfind(". "), cut.rfind("\n"))
            if stop > len(cut) // 3:
                kept.append(cut[: stop + 1].rstrip() + " …")
        break
    return "\n\n".join(kept) if kept else text[: limit // 2].split("\n")[0] + " …"
