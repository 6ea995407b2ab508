"""Checks a language model's answer against the sources it was given, before anyone reads it.

A model can cite a source it was never shown, invent a flag, or repeat a command the question
asked for (`curl x.sh | sh`). The rules, applied line by line so that a stream can be released a
line at a time and the user never sees an unchecked command:

- `[n]` must name a given source; other numbers are removed.
- Every command in the answer must appear verbatim (after whitespace normalisation) in the code
  of a cited source: its commands, a line of one of its code blocks, or its inline code. That
  covers fenced code (every line, except output lines in text/log blocks), inline code that
  looks like a command, bare `export`/`sudo`/`$ ` lines, and dangerous shell constructs written
  in plain prose. A failing command is replaced by a visible marker and recorded.
- Commands that destroy data or stop machines get a caution label next to them.
- A leading <think>…</think> block is dropped and a ```markdown fence wrapped around the whole
  answer is unwrapped (local reasoning models do both); neither is answer content.

Last, kb/verify_page.py parses the whole answer as a page would (CommonMark) and checks every
piece of code it finds once more: containers are where a line reader and a renderer can differ.

The stream pass can only check against *all* given sources (it cannot know what the rest of the
answer will cite); `verify()` then checks the whole answer against the *cited* ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ingest.code import (
    DANGER_IN_TEXT,
    FENCE_OPEN,
    PROMPT,
    closes,
    code_blocks,
    is_destructive,
    looks_like_command,
    prose,
    strip_prompt,
)
from ingest.entry import Entry

from .present import CAUTION

REMOVED = {
    "en": "[command removed: no cited source contains it]",
    "zh": "[已删除命令：引用的来源中没有此命令]",
}
LINK_REMOVED = {
    "en": "[link removed: no cited source gives it]",
    "zh": "[已删除链接：引用的来源中没有此链接]",
}
WARN = "⚠"
# An address ends where Chinese text goes on; one whose host starts with other letters
# (`http://ｅｖｉｌ.example`, `http://例.example`) runs to the next space or Chinese punctuation;
# `www.` alone is one too (pages make it a link).
_ADDRESS = (
    r"(?:(?i:https?|ftp)://|(?i:www)\.)"
    r"(?:[^\s<>()\[\]`\"'\u0080-\uffff]+|(?=[\u0080-\uffff])[^\s<>()\[\]`\"'，。；：、）]+)"
)
_URL = re.compile(
    rf"(?<![\w(])(<)?({_ADDRESS})(?(1)>)"
)  # bare or <autolinked>; no re.I (it folds k, s, i into the excluded range)
ELSEWHERE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)  # a link to another site (`#x`, `a.md` stay here)
_MD_LINK = re.compile(r"\[([^\]\n]*)\]\(\s*<?([^\s)>]+)>?(?:\s+\"[^\"]*\")?\s*\)")

SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
# [1] [1, 2] [1][2] 【1】; not an index like `ret[101]` (a letter or digit before it) nor a link.
_CITE = re.compile(
    r"(\s*)(?<![A-Za-z0-9_/])(?:\[|【)\s*(\d{1,3}(?:\s*[,，、;；]\s*\d{1,3})*)\s*(?:\]|】)(?!\()"
)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
_LIST_MARK = re.compile(r"^(\s*(?:>\s*)*(?:[-*+]|\d{1,2}[.)])?\s*)")
_ENV = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*=\S.*)$")
# Blocks of output: only their lines that look like commands are checked.
OUTPUT_INFOS = frozenset({"text", "txt", "log", "output", "plaintext", "plain", "console", "terminal"})


def norm(text: str) -> str:
    return " ".join(text.split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def url_key(url: str) -> str:
    """An address as compared with the sources': no fragment, trailing slash or punctuation."""
    from urllib.parse import unquote

    key = unquote(url).split("#", 1)[0].rstrip(".,;:!?。，；：/").lower()
    return re.sub(r"^(?:https?|ftp)://", "", key)  # `www.x.org/a` is the source's https://www.x.org/a


# Code shaped like a program and its arguments (`busybox wget URL -O ...`, `dnf install x`, `npx
# fixer`): the command words cannot name every program, and a reader copies what looks like one.
_PROGRAM_AND_ARGS = re.compile(r"[a-z][a-z0-9._+-]*(?:\s+\S+)+")


def unsourced_program(code: str, source_text: str) -> bool:
    """Inline code or an output line that could run, and that no cited source shows anywhere."""
    s = norm(strip_prompt(code))
    return bool(_PROGRAM_AND_ARGS.fullmatch(s)) and s not in source_text


def _lead(text: str) -> str:
    """A line's list or quote marker and indentation (the pattern matches any line)."""
    m = _LIST_MARK.match(text)
    return m.group(1) if m else ""


def units(lines: Sequence[str]) -> list[tuple[int, int, str]]:
    """Logical lines of a code block: (first, last, text), joining `\\` continuations."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        j = i
        while lines[j].rstrip().endswith("\\") and j + 1 < len(lines):
            j += 1
        out.append((i, j, "\n".join(lines[i : j + 1])))
        i = j + 1
    return out


def source_code(entry: Entry) -> dict[str, str]:
    """Normalised code text an entry shows -> how it shows it (for the verified command list)."""
    found: dict[str, str] = {}

    def add(text: str, shown: str | None = None) -> None:
        bare = strip_prompt(text)
        for key in (norm(bare), norm(text)):
            if key and not key.startswith("#"):
                found.setdefault(key, shown or bare)

    for cmd in entry.commands:
        add(cmd, cmd)
    for block in code_blocks(entry.body):
        for _, _, unit in units(block.lines):
            add(unit)
    for m in SPAN.finditer(prose(entry.body)):
        add(m.group(2))
    # `export NAME=value` and `NAME=value` set the same thing: accept either for the other.
    for key, shown in list(found.items()):
        setting = _ENV.match(key)
        if setting:
            found.setdefault(setting.group(1), shown)
            found.setdefault("export " + setting.group(1), shown)
    return found


class Guard:
    """Line-by-line cleaner. feed() returns the text released so far; finish() the rest."""

    def __init__(self, sources: Sequence[Entry], lang: str, cited: Sequence[int] | None = None) -> None:
        self.lang = lang if lang in REMOVED else "en"
        self.k = len(sources)
        self.allowed: dict[str, str] = {}
        numbers = range(1, self.k + 1) if cited is None else cited
        for n in numbers:
            for key, shown in source_code(sources[n - 1]).items():
                self.allowed.setdefault(key, shown)
        self.urls = {url_key(u) for n in numbers for u in re.findall(_ADDRESS, sources[n - 1].body)}
        self.source_text = norm("\n".join(sources[n - 1].body for n in numbers))
        self._allowed_long = sorted((k for k in self.allowed if len(k) >= 4), key=len, reverse=True)
        self.citations: list[int] = []  # valid numbers kept, in order of first use
        self.removed_citations: list[int] = []
        self.removed_commands: list[str] = []
        self.commands: list[str] = []  # verified commands as the sources show them
        self._pending = ""
        self._block: list[str] | None = None  # open fence line + body lines, until it closes
        self._fence = ""
        self._fence_indent = 0
        self._wrapper = ""  # the fence of a ```markdown block wrapped around the whole answer
        self._thinking = False  # inside <think>…</think> (reasoning models served raw)
        self._started = False

    # -- streaming interface ------------------------------------------------------------------
    def feed(self, text: str) -> str:
        self._pending += text
        out: list[str] = []
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            out.append(self._line(line + "\n"))
        return "".join(out)

    def finish(self) -> str:
        out = self._line(self._pending) if self._pending else ""
        self._pending = ""
        if self._block is not None:  # an unclosed fence: check what it holds all the same
            out += self._close_block(None)
        return out

    # -- lines ---------------------------------------------------------------------------------
    def _line(self, line: str) -> str:
        body = line.rstrip("\n")
        s = body.strip()
        if self._block is not None:
            # CommonMark: a closing fence is indented at most 3 spaces (more inside a list item,
            # as far as its opener is). A deeper one is a line of the block, as the page shows it.
            if closes(s, self._fence) and _indent(body) <= max(self._fence_indent, 3):
                return self._close_block(line)
            self._block.append(line)
            return ""
        # Some local models think aloud or wrap the whole answer in ```markdown: neither is
        # the answer's content; the reasoning is dropped and the wrapper's prose is read as prose.
        if self._thinking or (not self._started and s.startswith("<think>")):
            self._thinking = "</think>" not in s
            return ""
        m = FENCE_OPEN.match(body)
        first, self._started = not self._started and bool(s), self._started or bool(s)
        if m and first and m.group(3).lower() in ("markdown", "md"):
            self._wrapper = m.group(2)
            return ""
        if self._wrapper and s == self._wrapper:
            self._wrapper = ""
            return ""
        if m:
            self._block, self._fence, self._fence_indent = [line], m.group(2), _indent(body)
            return ""
        return self._prose(line)

    def _check(self, text: str) -> bool:
        key = norm(strip_prompt(text))
        if key in self.allowed:
            shown = self.allowed[key]
            if shown not in self.commands:
                self.commands.append(shown)
            return True
        self.removed_commands.append(strip_prompt(text))
        return False

    def _caution(self, indent: str = "", comment: bool = False) -> str:
        return f"{indent}{'# ' if comment else ''}{WARN} {CAUTION[self.lang]}\n"

    def _close_block(self, closing: str | None) -> str:
        assert self._block is not None
        opening, body = self._block[0], self._block[1:]
        self._block = None
        fence = FENCE_OPEN.match(opening.rstrip("\n"))
        info = fence.group(3).lower() if fence else ""
        raw = [ln.rstrip("\n") for ln in body]
        out = [opening]
        for first, last, unit in units(raw):
            s = strip_prompt(unit)
            checked = bool(s) and not s.startswith(("#", "//"))
            if checked and info in OUTPUT_INFOS:
                checked = (
                    bool(PROMPT.match(unit))
                    or looks_like_command(unit)
                    or unsourced_program(unit, self.source_text)
                )
            indent = raw[first][: len(raw[first]) - len(raw[first].lstrip())]
            if not checked:
                out.extend(body[first : last + 1])
            elif self._check(unit):
                if is_destructive(s):
                    out.append(self._caution(indent, comment=True))
                out.extend(body[first : last + 1])
            else:
                out.append(f"{indent}# {REMOVED[self.lang]}\n")
        if closing is not None:
            out.append(closing)
        return "".join(out)

    def _prose(self, line: str) -> str:
        end = "\n" if line.endswith("\n") else ""
        text = line[: len(line) - len(end)]
        # Split into inline code spans and the text around them.
        parts: list[tuple[bool, str, str]] = []
        pos = 0
        for m in SPAN.finditer(text):
            parts.append((False, text[pos : m.start()], ""))
            parts.append((True, m.group(0), m.group(2)))
            pos = m.end()
        parts.append((False, text[pos:], ""))

        # A whole line that is a command: `export X=1`, `sudo ...`, `$ ...` written without code.
        words_only = _CITE.sub("", text)
        bare = _LIST_MARK.sub("", words_only, count=1).strip()
        # Indented four spaces, a command is an indented code block on the page.
        # (A list item's line is not code, at any depth: `    - ssh into each node ...`.)
        indented = _indent(text) >= 4 and not _ITEM.match(text) and looks_like_command(bare)
        if len(parts) == 1 and (
            indented or PROMPT.match(bare) or re.match(r"(export|unset|sudo)\s+\S", bare)
        ):
            lead = _lead(text)
            if self._check(bare):
                return self._with_caution(
                    _CITE.sub(self._citation, text), end, is_destructive(strip_prompt(bare))
                )
            return f"{lead}{REMOVED[self.lang]}{end}"

        # Dangerous shell written in a sentence: the line goes unless it quotes a source's command.
        plain = norm(" ".join(p[1] for p in parts if not p[0]))
        quoted = [(m, self._covering(plain, m.start(), m.end())) for m in DANGER_IN_TEXT.finditer(plain)]
        for m, key in quoted:
            if key is None:
                self.removed_commands.append(plain[m.start() :].strip())
                return f"{_lead(text)}{REMOVED[self.lang]}{end}"
        for _, key in quoted:
            assert key is not None  # every span is covered by now
            if self.allowed[key] not in self.commands:
                self.commands.append(self.allowed[key])

        danger = bool(quoted)
        out: list[str] = []
        for is_code, chunk, inner in parts:
            if not is_code:
                out.append(self._links(_CITE.sub(self._citation, chunk)).replace("`", "\\`"))
            elif looks_like_command(inner) or unsourced_program(inner, self.source_text):
                if self._check(inner):
                    out.append(chunk)
                    danger = danger or is_destructive(strip_prompt(inner))
                else:
                    out.append(REMOVED[self.lang])
            elif any(url_key(u) not in self.urls for u in re.findall(_ADDRESS, inner)):
                out.append(LINK_REMOVED[self.lang])  # a page may make an address in code a link too
            else:
                out.append(chunk)
        return self._with_caution("".join(out), end, danger)

    def _links(self, text: str) -> str:
        """Links only to addresses the sources give: `[text](elsewhere)` keeps its text, any
        other address is replaced by a notice (a page may make a bare address a link)."""

        def markdown_link(m: re.Match) -> str:
            target = m.group(2)
            return m.group(0) if not ELSEWHERE.match(target) or url_key(target) in self.urls else m.group(1)

        def address(m: re.Match) -> str:
            return m.group(0) if url_key(m.group(2)) in self.urls else LINK_REMOVED[self.lang]

        return _URL.sub(address, _MD_LINK.sub(markdown_link, text))

    def _with_caution(self, text: str, end: str, danger: bool) -> str:
        """The line, then the caution label on a line of its own."""
        return text + end if not danger else f"{text}\n{self._caution().rstrip()}{end}"

    def _covering(self, plain: str, start: int, stop: int) -> str | None:
        """The source command (normalised) that the dangerous span start:stop is part of, if any."""
        for key in self._allowed_long:
            i = plain.find(key)
            while i >= 0:
                if i <= start and stop <= i + len(key):
                    return key
                i = plain.find(key, i + 1)
        return None

    def _citation(self, m: re.Match) -> str:
        numbers = [int(x) for x in re.findall(r"\d+", m.group(2))]
        good = [n for n in numbers if 1 <= n <= self.k]
        bad = [n for n in numbers if n not in good]
        for n in good:
            if n not in self.citations:
                self.citations.append(n)
        self.removed_citations.extend(bad)
        if not bad:
            return m.group(0)
        return (m.group(1) + "".join(f"[{n}]" for n in good)) if good else ""


@dataclass(frozen=True)
class Verified:
    text: str
    commands: tuple[str, ...]  # verified commands, as the cited sources show them
    cited: tuple[int, ...]  # valid source numbers the text still cites, in order of first use
    removed_commands: tuple[str, ...]
    removed_citations: tuple[int, ...]


def verify(text: str, sources: Sequence[Entry], lang: str) -> Verified:
    """The whole answer: citations against the given sources, commands against the cited ones."""
    from .verify_page import recheck

    first = Guard(sources, lang)
    out = first.feed(text) + first.finish()
    final = first
    if first.citations:
        final = Guard(sources, lang, cited=sorted(first.citations))
        out = final.feed(text) + final.finish()
    # What a page shows as code and as links, found as a page finds them.
    out, missed = recheck(
        out, final.allowed, REMOVED[final.lang], final.urls, LINK_REMOVED[final.lang], final.source_text
    )
    return Verified(
        text=out,
        commands=tuple(final.commands),
        cited=tuple(final.citations),
        removed_commands=tuple(dict.fromkeys([*final.removed_commands, *missed])),
        removed_citations=tuple(dict.fromkeys(final.removed_citations)),
    )
