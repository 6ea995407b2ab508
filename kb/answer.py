"""Answers: the Answer record, the extractive answer (default, offline) and its citations.

The LLM answer (kb/llm.py) builds on the same records and falls back to `extractive()`; what an
answer shows, and with which labels and cautions, is decided in kb/present.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from index.search import Hit, SearchResult
from index.views import answer_text
from ingest.code import FENCE_OPEN, closes, segments
from ingest.entry import Entry
from ingest.signals import commands

# The words of an answer and of its presentation (kb/present.py), in the reader's language.
LABELS = {
    "en": {
        "answer": "Answer",
        "commands": "Commands",
        "sources": "Sources",
        "no_match": "The knowledge base has no entry that answers this.",
        "suggest": "Nearest entries (not a match):",
        "weak": "Closest entry; it may not be your problem. Check its symptoms before running anything from it.",
        "other_lang": "Chinese version",
        "see_also": "See also",
    },
    "zh": {
        "answer": "回答",
        "commands": "命令",
        "sources": "来源",
        "no_match": "知识库中没有能回答这个问题的条目。",
        "suggest": "最接近的条目（并不匹配）：",
        "weak": "最接近的条目，未必是你遇到的问题。运行其中的命令前请先核对症状。",
        "other_lang": "英文版",
        "see_also": "另见",
    },
}


@dataclass(frozen=True)
class Citation:
    n: int
    entry: Entry

    def label(self) -> str:
        return f"[{self.n}] {self.entry.location} {self.entry.title}"


@dataclass(frozen=True)
class Answer:
    query: str
    lang: str
    text: str
    commands: tuple[str, ...]
    citations: tuple[Citation, ...]
    no_match: bool
    mode: str = "extractive"  # or "llm"
    notice: str = ""
    removed_commands: tuple[str, ...] = ()
    removed_citations: tuple[int, ...] = ()
    suggestions: tuple[Hit, ...] = ()
    hits: tuple[Hit, ...] = field(default=(), compare=False)
    weak: bool = False  # the closest entry, shown without its commands (see SearchResult.weak)

    @property
    def strength(self) -> str:
        return "none" if self.no_match else ("weak" if self.weak else "match")


_SHELL_INFO = ("bash", "shell", "sh", "console", "zsh")


def _prose_and_command_blocks(body: str) -> str:
    """The body without illustrative output: prose plus the shell blocks that hold commands,
    so a sentence ending in "run this:" keeps what it introduces. An unclosed block is dropped."""
    out: list[str] = []
    for seg in segments(body):
        if not seg.code:
            out.extend(seg.lines)
            continue
        opening = FENCE_OPEN.match(seg.lines[0])
        closed = len(seg.lines) > 1 and opening is not None and closes(seg.lines[-1], opening.group(2))
        if closed and seg.info in _SHELL_INFO and any(commands("\n".join(seg.lines))):
            out.extend(seg.lines)
    return "\n".join(out)


# Real HTML tags only (`<br/>`, `<font size=3>`): `<hostname>` or `<image>` in a command is a
# placeholder the reader must see.
_HTML_TAG = re.compile(
    r"</?(br|font|a|img|p|div|span|b|i|u|strong|em|sup|sub|details|summary|center|table|tr|td|th|"
    r"ul|ol|li|hr|h[1-6])\b[^<>]*/?>",
    re.I,
)


def key_text(entry: Entry, limit: int = 900) -> str:
    """The part of an entry that answers: the text after `A:` when there is one, else all of it,
    without illustrative output."""
    text = _prose_and_command_blocks(entry.body)
    m = re.search(r"(?m)^\s*A\s*[:：]\s*", text)
    if m:
        text = text[m.end() :]
    lines = [ln.rstrip() for ln in text.split("\n")]
    cleaned = "\n".join(ln for ln in lines if ln.strip() not in ("<br/>", "<br>"))
    cleaned = _HTML_TAG.sub("", cleaned).strip()
    if not cleaned:
        cleaned = answer_text(entry, limit)
    cleaned = re.sub(r"\n{3,}", "\n\n", cleaned)
    if len(cleaned) > limit:
        cut = cleaned[:limit]
        if cut.count("```") % 2:  # never cut inside a code block
            cut = cut[: cut.rfind("```")]
        stop = max(cut.rfind("。"), cut.rfind(". "), cut.rfind("\n"))
        cleaned = (cut[: stop + 1] if stop > limit // 2 else cut).rstrip() + " …"
    return cleaned


def entry_in(hit: Hit, lang: str) -> Entry:
    if hit.entry.lang != lang and hit.translation is not None and hit.translation.lang == lang:
        return hit.translation
    return hit.entry


def extractive(result: SearchResult, max_sources: int = 3) -> Answer:
    lang = result.lang if result.lang in LABELS else "en"
    if result.no_match:
        return Answer(
            query=result.query,
            lang=lang,
            text=LABELS[lang]["no_match"],
            commands=(),
            citations=(),
            no_match=True,
            suggestions=tuple(result.suggestions[:3]),
        )
    cited = [entry_in(h, lang) for h in result.hits[:max_sources]]
    citations = tuple(Citation(n, e) for n, e in enumerate(cited, 1))
    best = cited[0]
    text = f"{best.title}\n\n{key_text(best)} [1]"
    if result.weak:
        # A wrong answer with a command is worse than no answer: a weak match shows the entry,
        # says it may not fit, and leaves its commands in the source.
        text = f"{LABELS[lang]['weak']}\n\n{text}"
    if len(citations) > 1:
        text += (
            "\n\n"
            + LABELS[lang]["see_also"]
            + ": "
            + ", ".join(f"[{c.n}] {c.entry.title}" for c in citations[1:])
        )
    return Answer(
        query=result.query,
        lang=lang,
        text=text,
        commands=() if result.weak else best.commands,
        citations=citations,
        no_match=False,
        hits=tuple(result.hits),
        weak=result.weak,
    )
