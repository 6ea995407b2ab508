"""Answers: the extractive answer (default, offline), citations, and command safety labels.

The LLM answer (kb/llm.py) builds on the same records and falls back to `extractive()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from index.search import Hit, SearchResult
from index.views import answer_text
from ingest.entry import Entry
from ingest.signals import commands

# Commands that destroy data, kill processes or stop machines: shown with a caution label.
_DESTRUCTIVE = re.compile(
    r"(^|[;&|]\s*|\bsudo\s+)(rm\s+-\w*[rf]|dd\b.*\bof=/dev/|mkfs(\.\w+)?\b|reboot\b|shutdown\b|poweroff\b|halt\b|"
    r"kill\s+-(9|KILL)\b|pkill\b|killall\b|ipcrm\b|wipefs\b|fdisk\b|parted\b|>\s*/dev/sd|chmod\s+-R\s+777\s+/|"
    r"iptables\s+-F|systemctl\s+(stop|disable)\b)"
    # Piping a download into a shell runs whatever the server sends.
    r"|\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b",
    re.I,
)


def is_destructive(command: str) -> bool:
    return bool(_DESTRUCTIVE.search(command.strip()))


CAUTION = {
    "en": "Caution: this command deletes data, kills processes or stops a machine. Check it before running.",
    "zh": "注意：此命令会删除数据、结束进程或停止机器，运行前请确认。",
}

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
        return f"[{self.n}] {self.entry.doc}:{self.entry.start_line}-{self.entry.end_line} {self.entry.title}"


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
    so a sentence ending in "run this:" keeps what it introduces."""
    out: list[str] = []
    block: list[str] = []
    keep = False
    fence = ""
    for line in body.split("\n"):
        stripped = line.strip()
        if not fence and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            keep = stripped[3:].strip().lower() in _SHELL_INFO
            block = [line]
            continue
        if fence:
            block.append(line)
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                if keep and any(commands("\n".join(block))):
                    out.extend(block)
                fence = ""
            continue
        out.append(line)
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


def render_text(answer: Answer) -> str:
    """Plain-text rendering for the terminal."""
    labels = LABELS.get(answer.lang, LABELS["en"])
    out = [answer.text]
    if answer.notice:
        out.insert(0, f"! {answer.notice}")
    if answer.no_match and answer.suggestions:
        out.append("")
        out.append(labels["suggest"])
        for h in answer.suggestions:
            e = h.entry
            out.append(f"  - {e.title} ({e.doc}:{e.start_line}-{e.end_line})")
    if answer.commands:
        out.append("")
        out.append(labels["commands"] + ":")
        for cmd in answer.commands:
            if is_destructive(cmd):
                out.append(f"  # {CAUTION[answer.lang if answer.lang in CAUTION else 'en']}")
            out.append("  $ " + cmd.replace("\n", "\n    "))
    if answer.citations:
        out.append("")
        out.append(labels["sources"] + ":")
        out.extend("  " + c.label() for c in answer.citations)
    return "\n".join(out)
