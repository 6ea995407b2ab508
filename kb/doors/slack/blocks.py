"""Answer -> Slack Block Kit messages.

Slack's limits shape this module: a message holds at most 50 blocks, a section's text at most
3,000 characters, and a message's text is cut at 40,000. A long answer therefore becomes several
messages (posted one after another in the same thread), never a rejected or truncated one.
No slack_sdk import: the blocks are plain dicts, so this module is cheap and easy to test.
"""

from __future__ import annotations

import re

from ...answer import Answer
from ...present import INVISIBLE, Lookup, Ref, present

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
# Slack truncates a message at 40,000 characters; stay well below so escaping never tips it over.
MAX_MESSAGE_CHARS = 30000
# The `text` that goes with blocks is what notifications and screen readers show.
MAX_FALLBACK_CHARS = 1000


def escape(text: str) -> str:
    """Slack treats &, < and > as control characters everywhere, code blocks included."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_LINK = re.compile(r"\[([^\]\n]+)\]\((\S+?)\)")
_HEADING = re.compile(r"(?m)^#{1,6}\s+(.+?)\s*#*$")
_WEB_ADDRESS = re.compile(r"https?://[^\s|<>]+", re.I)


def to_mrkdwn(markdown: str) -> str:
    """The few markdown forms FAQ prose uses, in Slack's mrkdwn dialect (which has no headings).
    Code blocks are only escaped, and their fences lose the info string: mrkdwn knows no
    languages, and ```bash would show `bash` as the block's first line (and copy it with it);
    a `# comment` in a block is not a heading."""
    from ingest.code import FENCE_OPEN, segments

    parts = []
    for seg in segments(markdown):
        if seg.code:
            opening = FENCE_OPEN.match(seg.lines[0])
            assert opening is not None  # a code segment starts with its fence
            parts.append(escape("\n".join([opening.group(1) + opening.group(2), *seg.lines[1:]])))
        else:
            text = _HEADING.sub(r"*\1*", escape("\n".join(seg.lines)))
            text = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", text)
            parts.append(_LINK.sub(_link, text))
    return "\n".join(parts)


def _link(m: re.Match) -> str:
    """A web link; any other target (`!channel`, `@U123`) would ping people: its text only."""
    text, target = m.group(1).replace("|", "/"), m.group(2)
    return f"<{target}|{text}>" if _WEB_ADDRESS.fullmatch(target) else text


def split_text(text: str, limit: int = MAX_SECTION_CHARS) -> list[str]:
    """Cut text into pieces of at most `limit` characters at paragraph, then line, then any boundary.

    A code fence that a cut falls inside is closed at the end of one piece and reopened at the
    start of the next, so every piece renders on its own.
    """
    if len(text) <= limit:
        return [text]
    fence = "```"
    pieces: list[str] = []
    current = ""
    in_fence = False
    budget = limit - 2 * (len(fence) + 1)  # room to close and reopen a fence
    for line in _lines_within(text, budget):
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > budget and current:
            pieces.append(current + (f"\n{fence}" if in_fence else ""))
            current = (f"{fence}\n" if in_fence else "") + line
        else:
            current = candidate
        if line.strip().startswith(fence) and line.strip().count(fence) % 2 == 1:
            in_fence = not in_fence
    if current.strip():
        pieces.append(current)
    return pieces


def _lines_within(text: str, width: int):
    for line in text.split("\n"):
        while len(line) > width:
            yield line[:width]
            line = line[width:]
        yield line


def _escaped_pieces(text: str, limit: int) -> list[str]:
    """Split raw text so that each piece, once escaped, fits `limit` (no entity is cut in half)."""
    out: list[str] = []
    for piece in split_text(text, limit):
        current = ""
        for ch in piece:
            e = escape(ch)
            if len(current) + len(e) > limit:
                out.append(current)
                current = ""
            current += e
        out.append(current)
    return out


def entry_ref(ref: Ref) -> str:
    """A link to the entry's source lines when a docs base URL is configured, else `doc:lines`."""
    title = escape(ref.title).replace("|", "/")
    if ref.url:
        return f"<{ref.url}|{title}> (`{escape(ref.location)}`)"
    return f"{title} (`{escape(ref.location)}`)"


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:MAX_SECTION_CHARS]}]}


def _sections(mrkdwn: str) -> list[dict]:
    return [_section(piece) for piece in split_text(mrkdwn) if piece.strip()]


def answer_blocks(answer: Answer, docs_base_url: str = "", lookup: Lookup | None = None) -> list[dict]:
    """All blocks of an answer, in reading order (kb/present.py decides what shows);
    `answer_messages` splits them into messages."""
    p = present(answer, docs_base_url, lookup)
    blocks: list[dict] = []
    if p.notice:
        blocks.append(_context(":information_source: " + escape(p.notice)))
    if p.headline is not None:  # how strong the match is, the entry's title, the line that matched
        blocks.append(_section(f"*{escape(p.strength_label)}* · *{to_mrkdwn(p.headline.title)}*"))
        if p.warning:
            blocks.append(_context(":warning: " + escape(p.warning)))
        if p.matched_line:
            blocks.append(_context(f"{escape(p.labels['matched_line'])}: `{escape(p.matched_line)}`"))
    blocks.extend(_sections(to_mrkdwn(p.cautioned_text("⚠ "))))
    if p.suggestions:
        lines = [f"*{escape(p.labels['suggest'])}*"] + [f"• {entry_ref(r)}" for r in p.suggestions]
        blocks.extend(_sections("\n".join(lines)))
    if p.commands:
        blocks.append(_section(f"*{escape(p.labels['commands'])}*"))
        for c in p.commands:
            if c.caution:
                blocks.append(_context(":warning: *" + escape(c.caution) + "*"))
            # Each command is its own block so it can be copied alone; a huge one is cut in pieces.
            for piece in _escaped_pieces(c.text, MAX_SECTION_CHARS - 8):
                blocks.append(_section(f"```{piece}```"))
    if p.sources:
        lines = [f"*{escape(p.labels['sources'])}*"] + [f"[{r.n}] {entry_ref(r)}" for r in p.sources]
        if p.other_language is not None:
            lines.append(f"{escape(p.labels['other_lang'])}: {entry_ref(p.other_language)}")
        blocks.extend(_sections("\n".join(lines)))
    return blocks


def _block_chars(block: dict) -> int:
    if "text" in block:
        return len(block["text"]["text"])
    return sum(len(el.get("text", "")) for el in block.get("elements", []))


def pack(blocks: list[dict], fallback: str) -> list[dict]:
    """Group blocks into chat.postMessage payloads ({text, blocks}) within Slack's limits."""
    messages: list[dict] = []
    current: list[dict] = []
    chars = 0
    for block in blocks:
        size = _block_chars(block)
        if current and (len(current) >= MAX_BLOCKS or chars + size > MAX_MESSAGE_CHARS):
            messages.append({"blocks": current})
            current, chars = [], 0
        current.append(block)
        chars += size
    if current:
        messages.append({"blocks": current})
    short = fallback if len(fallback) <= MAX_FALLBACK_CHARS else fallback[: MAX_FALLBACK_CHARS - 1] + "…"
    for i, message in enumerate(messages):
        message["text"] = short if i == 0 else f"({i + 1}/{len(messages)}) {short[:200]}"
    return messages


def answer_messages(answer: Answer, docs_base_url: str = "", lookup: Lookup | None = None) -> list[dict]:
    """The Slack messages that carry an answer; usually one, more when the answer is long."""
    title = answer.citations[0].entry.title + "\n\n" if answer.citations else ""
    return pack(answer_blocks(answer, docs_base_url, lookup), escape(title + INVISIBLE.sub("", answer.text)))


def with_note(messages: list[dict], note: str) -> list[dict]:
    """The messages with `note` as a context line at the top of the first one (or a message of
    its own when that one is full)."""
    block = _context(":information_source: " + escape(note))
    first = messages[0]
    if len(first["blocks"]) < MAX_BLOCKS:
        return [{**first, "blocks": [block, *first["blocks"]]}, *messages[1:]]
    return [{"text": escape(note)[:MAX_FALLBACK_CHARS], "blocks": [block]}, *messages]


def text_messages(text: str) -> list[dict]:
    """A plain notice (usage hint, error) as Slack messages."""
    return pack(_sections(escape(text)), escape(text))


__all__ = [
    "MAX_BLOCKS",
    "MAX_SECTION_CHARS",
    "answer_blocks",
    "answer_messages",
    "entry_ref",
    "escape",
    "pack",
    "split_text",
    "text_messages",
    "to_mrkdwn",
    "with_note",
]
