"""Answer -> Slack Block Kit messages.

Slack's limits shape this module: a message holds at most 50 blocks, a section's text at most
3,000 characters, and a message's text is cut at 40,000. A long answer therefore becomes several
messages (posted one after another in the same thread), never a rejected or truncated one.
No slack_sdk import: the blocks are plain dicts, so this module is cheap and easy to test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

from ingest.entry import Entry

from .answer import CAUTION, LABELS, Answer, is_destructive

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
# Slack truncates a message at 40,000 characters; stay well below so escaping never tips it over.
MAX_MESSAGE_CHARS = 30000
# The `text` that goes with blocks is what notifications and screen readers show.
MAX_FALLBACK_CHARS = 1000

Lookup = Callable[[str], Entry | None]


def escape(text: str) -> str:
    """Slack treats &, < and > as control characters everywhere, code blocks included."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_LINK = re.compile(r"\[([^\]\n]+)\]\((\S+?)\)")
_HEADING = re.compile(r"(?m)^#{1,6}\s+(.+?)\s*#*$")


def to_mrkdwn(markdown: str) -> str:
    """The few markdown forms FAQ prose uses, in Slack's mrkdwn dialect (which has no headings)."""
    text = escape(markdown)
    text = _HEADING.sub(r"*\1*", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", text)
    return _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1).replace('|', '/')}>", text)


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


def citation_url(base_url: str, entry: Entry) -> str:
    return f"{base_url.rstrip('/')}/{quote(entry.doc)}#L{entry.start_line}-L{entry.end_line}"


def entry_ref(entry: Entry, base_url: str) -> str:
    """A link to the entry's source lines when a docs base URL is configured, else `doc:lines`."""
    title = escape(entry.title).replace("|", "/")
    where = f"{entry.doc}:{entry.start_line}-{entry.end_line}"
    if base_url:
        return f"<{citation_url(base_url, entry)}|{title}> (`{escape(where)}`)"
    return f"{title} (`{escape(where)}`)"


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:MAX_SECTION_CHARS]}]}


def _sections(mrkdwn: str) -> list[dict]:
    return [_section(piece) for piece in split_text(mrkdwn) if piece.strip()]


def _other_language(answer: Answer, lookup: Lookup | None) -> Entry | None:
    """The best entry's translation, from the index when a lookup is given, else from the hits."""
    if not answer.citations:
        return None
    best = answer.citations[0].entry
    if not best.translation:
        return None
    found = lookup(best.translation) if lookup else None
    if found is None:
        for h in answer.hits:
            for e in (h.entry, h.translation):
                if e is not None and e.id == best.translation:
                    found = e
    return found if found is not None and found.lang != answer.lang else None


def answer_blocks(answer: Answer, docs_base_url: str = "", lookup: Lookup | None = None) -> list[dict]:
    """All blocks of an answer, in reading order; `answer_messages` splits them into messages."""
    lang = answer.lang if answer.lang in LABELS else "en"
    labels = LABELS[lang]
    blocks: list[dict] = []
    if answer.notice:
        blocks.append(_context(":information_source: " + escape(answer.notice)))
    text = to_mrkdwn(answer.text)
    if answer.citations:  # the extractive answer starts with the entry's title: show it as one
        title = to_mrkdwn(answer.citations[0].entry.title)
        if text.startswith(title + "\n"):
            text = f"*{title}*" + text[len(title) :]
    blocks.extend(_sections(text))
    if answer.no_match and answer.suggestions:
        lines = [f"*{escape(labels['suggest'])}*"]
        lines += [f"• {entry_ref(h.entry, docs_base_url)}" for h in answer.suggestions]
        blocks.extend(_sections("\n".join(lines)))
    if answer.commands:
        blocks.append(_section(f"*{escape(labels['commands'])}*"))
        for command in answer.commands:
            if is_destructive(command):
                blocks.append(_context(":warning: *" + escape(CAUTION[lang]) + "*"))
            # Each command is its own block so it can be copied alone; a huge one is cut in pieces.
            for piece in _escaped_pieces(command, MAX_SECTION_CHARS - 8):
                blocks.append(_section(f"```{piece}```"))
    if answer.citations:
        lines = [f"*{escape(labels['sources'])}*"]
        lines += [f"[{c.n}] {entry_ref(c.entry, docs_base_url)}" for c in answer.citations]
        other = _other_language(answer, lookup)
        if other is not None:
            lines.append(f"{escape(labels['other_lang'])}: {entry_ref(other, docs_base_url)}")
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
    return pack(answer_blocks(answer, docs_base_url, lookup), escape(answer.text))


def text_messages(text: str) -> list[dict]:
    """A plain notice (usage hint, error) as Slack messages."""
    return pack(_sections(escape(text)), escape(text))


__all__ = [
    "MAX_BLOCKS",
    "MAX_SECTION_CHARS",
    "answer_blocks",
    "answer_messages",
    "citation_url",
    "escape",
    "pack",
    "split_text",
    "text_messages",
    "to_mrkdwn",
]
