"""What an answer shows, decided once for every door: the labels in the reader's language, the
notice, the text, the commands with their cautions, the sources, the nearest entries when
nothing matches, the other-language version, and the links to the documents.

Each door only formats a Presentation: the terminal (kb/doors/cli.py), the chat's markdown
(kb/doors/web/render.py) and Slack's blocks (kb/doors/slack/blocks.py). Before this module each
door decided for itself and they drifted: suggestions followed the reader's language on the web
but not in Slack, line anchors were only in Slack's links, the other-language version only in
Slack's answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from index.search import Hit
from ingest.code import is_destructive, placeholders, segments
from ingest.entry import Entry

from .answer import LABELS, Answer, entry_in

# Direction overrides and zero-width characters make a command read otherwise than it runs
# (U+202E before `ehcac` in `rm -rf ~/ehcac` shows `cache`) or copy a character nobody sees: an
# answer shows none of them, so what is read is what is copied. (The terminal strips them too.)
INVISIBLE = re.compile("[\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")

CAUTION = {
    "en": "Caution: this command deletes data, kills processes or stops a machine. Check it before running.",
    "zh": "注意：此命令会删除数据、结束进程或停止机器，运行前请确认。",
}

FILL_IN = {
    "en": "Replace {names} before running: as written, the shell reads < and > as redirections.",
    "zh": "运行前请替换 {names}：原样运行时，shell 会把 < 和 > 当作重定向。",
}
# A value the FAQ describes in words (`==需要安装的版本号（如 2.0）`): no redirection, but not runnable.
FILL_IN_WORDS = {
    "en": "Replace {names} with your value before running.",
    "zh": "运行前请把 {names} 换成实际的值。",
}


def command_caution(command: str, lang: str) -> str:
    """The label a command is shown with: what it destroys, what to fill in; "" when neither."""
    return block_caution([command], lang)


def block_caution(lines: Sequence[str], lang: str) -> str:
    """The label of a command, or of a code block by its lines: a destructive line gives the
    caution, placeholders anywhere the note on filling them in; "" when neither."""
    names = list(dict.fromkeys(n for line in lines for n in placeholders(line)))
    parts = [CAUTION[lang]] if any(map(is_destructive, lines)) else []
    for template, these in ((FILL_IN, [n for n in names if n.startswith("<")]),
                            (FILL_IN_WORDS, [n for n in names if not n.startswith("<")])):  # fmt: skip
        if these:
            parts.append(template[lang].format(names=" ".join(these)))
    return " ".join(parts)


def cautioned(commands: Sequence[str], lang: str) -> list[tuple[str, str]]:
    """Each command with its label, except a note on filling in placeholders that the command
    just above already carries: two `docker run ... <image>` lines in a row showed it twice. A
    caution about what a command destroys stands above every such command, even the same one."""
    out: list[tuple[str, str]] = []
    above = ""
    for c in commands:
        label = command_caution(c, lang)
        out.append((c, "" if label == above and not is_destructive(c) else label))
        above = label
    return out


Lookup = Callable[[str], Entry | None]  # entry id -> entry (KnowledgeBase.entry)


def entry_url(base_url: str, entry: Entry) -> str:
    """The entry's lines in the published documents (`docs_base_url`), "" when none is set."""
    if not base_url:
        return ""
    return f"{base_url.rstrip('/')}/{quote(entry.doc)}#L{entry.start_line}-L{entry.end_line}"


@dataclass(frozen=True)
class Ref:
    """An entry as a door links to it."""

    entry: Entry
    location: str  # doc:start-end
    url: str  # its lines in the published documents, "" without docs_base_url
    n: int | None = None  # the citation number, for sources

    @property
    def title(self) -> str:
        return self.entry.title


@dataclass(frozen=True)
class Command:
    text: str
    caution: str  # "" when the command is safe to show without one


@dataclass(frozen=True)
class Presentation:
    lang: str  # "en" or "zh": the labels' language
    labels: dict[str, str]
    notice: str
    text: str  # the answer (the "no match" sentence when nothing matches)
    no_match: bool
    weak: bool
    mode: str  # "extractive" or "llm"
    strength: str  # "match", "weak" (the closest entry, maybe not the problem) or "none"
    strength_label: str  # "Matches" / "Closest entry, not a match" / "No match", in the reader's language
    reply: bool  # a word back to thanks or "clear": no strength to show, nothing was searched
    warning: str  # for a weak match: check the symptoms before running anything; else ""
    headline: Ref | None  # the entry the answer gives: its title is the answer's heading
    matched_line: str  # the line of the paste that matched the entry, quoted; "" when none
    commands: tuple[Command, ...]
    sources: tuple[Ref, ...]
    suggestions: tuple[Ref, ...]  # nearest entries when nothing matches, in the reader's language
    other_language: Ref | None  # the best source in the other language

    def cautioned_text(self, mark: str = "> ⚠ ") -> str:
        """`text` with each code block that holds a destructive command or a placeholder led by
        its label (block_caution), as `mark` + label: the terminal's and Slack's answer. The
        commands an answer shows in its blocks are not listed again, so without this a
        placeholder in them went unlabelled."""
        out: list[str] = []
        for seg in segments(self.text):
            label = block_caution(seg.lines[1:-1], self.lang) if seg.code else ""
            out += [f"{mark}{label}", ""] if label else []
            out += list(seg.lines)
        return "\n".join(out)


def reader_language(text: str, lang: str | None = None) -> str:
    """The language a door shows its own words in before the answer exists: the one asked
    for, else the one the post reader finds in the person's words."""
    if lang in LABELS:
        return lang
    from index.post import read_post

    found = read_post(text[:200_000]).lang
    return found if found in LABELS else "en"


def _ref(entry: Entry, base_url: str, n: int | None = None) -> Ref:
    return Ref(entry, entry.location, entry_url(base_url, entry), n)


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


def _in_fence(command: str, text: str) -> bool:
    return any(command.strip() in "\n".join(seg.lines) for seg in segments(text) if seg.code)


def present(answer: Answer, docs_base_url: str = "", lookup: Lookup | None = None) -> Presentation:
    lang = answer.lang if answer.lang in LABELS else "en"
    labels = LABELS[lang]
    # A command the answer already shows in one of its code blocks is not listed again.
    text = INVISIBLE.sub("", answer.text)
    shown = (INVISIBLE.sub("", c) for c in answer.commands)
    commands = tuple(c for c in shown if not _in_fence(c, text))
    suggestions: tuple[Hit, ...] = answer.suggestions if answer.no_match else ()
    other = _other_language(answer, lookup)
    return Presentation(
        lang=lang,
        labels=labels,
        notice=answer.notice,
        text=text,
        no_match=answer.no_match,
        weak=answer.weak,
        mode=answer.mode,
        strength=answer.strength,
        strength_label=labels[{"match": "match", "weak": "weak_badge", "none": "none"}[answer.strength]],
        reply=answer.reply,
        warning=labels["weak"] if answer.weak else "",
        headline=_ref(answer.citations[0].entry, docs_base_url, 1) if answer.citations else None,
        matched_line=INVISIBLE.sub("", answer.matched_line),
        commands=tuple(Command(c, label) for c, label in cautioned(commands, lang)),
        sources=tuple(_ref(c.entry, docs_base_url, c.n) for c in answer.citations),
        suggestions=tuple(_ref(entry_in(h, lang), docs_base_url) for h in suggestions),
        other_language=_ref(other, docs_base_url) if other is not None else None,
    )
