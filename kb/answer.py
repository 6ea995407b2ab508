"""Answers: the Answer record, the extractive answer (default, offline) and its citations.

The LLM answer (kb/llm.py) builds on the same records and falls back to `extractive()`; what an
answer shows, and with which labels and cautions, is decided in kb/present.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from index.search import Hit, SearchResult
from index.text import without_colours
from index.views import answer_text
from ingest.code import FENCE_OPEN, INLINE_CODE, PROMPT, closes, looks_like_command, segments
from ingest.entry import Entry
from ingest.signals import commands

# The words of an answer and of its presentation (kb/present.py), in the reader's language.
LABELS = {
    "en": {
        "answer": "Answer",
        "commands": "Commands",
        "sources": "Sources",
        "no_match": "The knowledge base has no entry that answers this.",
        "vague": "This does not say how it fails, so no single entry fits it. Say what you ran and where "
        "(the command, the framework, the hardware) and paste the error line.",
        "judged_none": "The closest entries are about other problems: the language model read them and "
        "found none that answers this.",
        "suggest": "Nearest entries (not a match):",
        "weak": "Closest entry; it may not be your problem. Check its symptoms before running anything from it.",
        "other_lang": "Chinese version",
        "see_also": "See also",
        "more": "The rest of this entry is in its source [1].",
        "match": "Matches",
        "weak_badge": "Closest entry, not a match",
        "none": "No match",
        "matched_line": "Matched line in your paste",
        "code_in_source": "(Its commands are left out until you confirm it is your problem: see the source [1].)",
        "command": "(a command: see the source)",
        "in_source": "(shown in the source)",
        "title_only": "The entry says no more than its title: see the source [1].",
        "thanks": "Glad it helped. Paste the next error whenever you need to.",
        "clear": "Starting over: earlier messages are not read with the next question.",
    },
    "zh": {
        "answer": "回答",
        "commands": "命令",
        "sources": "来源",
        "no_match": "知识库中没有能回答这个问题的条目。",
        "vague": "这句话没有说明是怎么出错的，选不出对应的条目。请说明运行了什么、在什么环境下（命令、框架、硬件），并贴出报错的那一行。",
        "judged_none": "最接近的几个条目说的是别的问题：语言模型读过之后，判断没有一个能回答这个问题。",
        "suggest": "最接近的条目（并不匹配）：",
        "weak": "最接近的条目，未必是你遇到的问题。运行其中的命令前请先核对症状。",
        "other_lang": "英文版",
        "see_also": "另见",
        "more": "条目的其余内容见来源 [1]。",
        "match": "匹配",
        "weak_badge": "最接近的条目，并不匹配",
        "none": "没有匹配",
        "matched_line": "你的日志中匹配的一行",
        "code_in_source": "（确认是同一个问题后再看其中的命令：见来源 [1]。）",
        "command": "（命令见来源）",
        "in_source": "（见来源）",
        "title_only": "该条目只有标题，没有更多内容：见来源 [1]。",
        "thanks": "不客气。有新的报错随时贴上来。",
        "clear": "已重新开始：之前的消息不再和下一个问题一起读。",
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
    matched_line: str = ""  # the line of the query that matched the best entry (see matched_line)
    vague: bool = False  # no match because the query names nothing specific (see SearchResult.vague)
    reply: bool = False  # a word back to thanks or "clear": nothing was searched (small_talk_answer)

    @property
    def strength(self) -> str:
        return "none" if self.no_match else ("weak" if self.weak else "match")


_SHELL_INFO = ("bash", "shell", "sh", "console", "zsh")


INTRODUCED_BLOCK_LINES = 3  # a block this short after "…is:" is what the sentence shows
# Code someone puts into their script or config: a fix of this many lines is the answer itself.
INTRODUCED_CODE_LINES = 15
_SOURCE_INFO = (
    "python",
    "py",
    "yaml",
    "yml",
    "json",
    "toml",
    "ini",
    "cfg",
    "conf",
    "cpp",
    "c",
    "c++",
    "cuda",
)


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


def _without_code(text: str, lang: str) -> str:
    """A weak match's text: its code left in the source, commands in its sentences too (``run
    `sudo ln -sf ...` ``, an indented `apt install ...`); only a quoted log line stays."""
    kept, withheld = [], False
    for block in _blocks(text):
        if FENCE_OPEN.match(block):
            if _quotes_output(block):
                kept.append(block)
            else:
                withheld = True
            continue
        lines = []
        for line in block.split("\n"):
            if (line.startswith((" " * 4, "\t")) or PROMPT.match(line)) and looks_like_command(line.strip()):
                withheld = True  # an indented block's or a prompted command; prose and tables stay
                continue
            shown = INLINE_CODE.sub(
                lambda m: LABELS[lang]["command"] if looks_like_command(m.group(1)) else m.group(0), line
            )
            withheld = withheld or shown != line
            lines.append(shown)
        if any(ln.strip() for ln in lines):
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


def entry_in(hit: Hit, lang: str) -> Entry:
    return in_language(hit.entry, hit.translation, lang)


def in_language(entry: Entry, translation: Entry | None, lang: str) -> Entry:
    """The entry as the reader sees it: its translation when that is in the reader's language."""
    if entry.lang != lang and translation is not None and translation.lang == lang:
        return translation
    return entry


def no_match_text(result: SearchResult, lang: str) -> str:
    """What "no match" says: that nothing answers, or, for a question that names nothing, what to add."""
    return LABELS[lang]["vague" if result.vague else "no_match"]


def no_match_answer(
    result: SearchResult, lang: str, text: str, nearest: list[Hit], mode: str = "extractive"
) -> Answer:
    """ "No match": the sentence saying why, no commands or citations, and the nearest entries
    to browse (the gate's no match here, the language model's verdict in kb/llm.py)."""
    return Answer(
        query=result.query,
        lang=lang,
        text=text,
        commands=(),
        citations=(),
        no_match=True,
        mode=mode,
        suggestions=tuple(nearest[:3]),
        vague=result.vague,
    )


def small_talk_answer(query: str, kind: str, lang: str) -> Answer:
    """Thanks or "clear" (kb/conversation.py small_talk): a word back, nothing searched, nothing
    queued as unanswered (it names no problem: vague)."""
    return Answer(query, lang, LABELS[lang][kind], (), (), no_match=True, vague=True, reply=True)


# A line the mark can end: not code (a fence, four spaces in), a table row or a quote.
_IS_PROSE_LINE = re.compile(r"^(?! {4}|\t|\s*(?:`{3,}|~{3,}|\||>))")
_CITES_FIRST_AT_END = re.compile(r"\[1\][.。)）]*\s*$")


def extractive(result: SearchResult, max_sources: int = 3) -> Answer:
    lang = result.lang if result.lang in LABELS else "en"
    if result.no_match:
        return no_match_answer(result, lang, no_match_text(result, lang), result.suggestions)
    cited = [entry_in(h, lang) for h in related_hits(result.hits)[:max_sources]]
    citations = tuple(Citation(n, e) for n, e in enumerate(cited, 1))
    best = cited[0]
    # The entry's title is not repeated as the answer's first sentence: the doors show it as
    # the answer's heading, with the match strength (kb/present.py). A weak match shows the entry
    # without its commands: a wrong answer with a command is worse than none.
    body = _without_code(key_text(best), lang) if result.weak else key_text(best)
    # A closing note (commands left out, the rest in the source) already points at [1]. After
    # code, a table or a quote the mark goes on a line of its own: on a fence's line it broke the
    # block, in an indented block it was copied with the command, in a table it made a cell.
    if not body.strip():
        text = LABELS[lang]["title_only"]
    elif _CITES_FIRST_AT_END.search(body):
        text = body
    else:
        text = f"{body} [1]" if _IS_PROSE_LINE.match(body.rstrip().split("\n")[-1]) else f"{body}\n\n[1]"
    return Answer(
        query=result.query,
        lang=lang,
        text=text,
        commands=() if result.weak else best.commands,
        citations=citations,
        no_match=False,
        hits=tuple(result.hits),
        weak=result.weak,
        matched_line=matched_line(result),
    )


# Further sources are shown only when they score near the best: the third source used to be
# whatever came third (an accelerate entry under a Paddle answer). Ranking scores are logits;
# measured on the bundled KB, related entries score at least ~0.4 of the best.
RELATED_SHARE = 0.4


def related_hits(hits: list[Hit]) -> list[Hit]:
    if not hits:
        return []
    top = hits[0].score
    return [hits[0], *(h for h in hits[1:] if h.score > 0 and h.score >= RELATED_SHARE * top)]


QUOTED_LINES = 1500  # read from each end of a paste for the quote: errors sit near its end
_WORD = re.compile(r"\w+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _words(line: str) -> set[str]:
    # Numbers alone (timestamps, process ids, ranks) differ from one run of an error to the next.
    return {w for w in _WORD.findall(line.lower()) if not w.isdigit()}


def matched_line(result: SearchResult, n: int = 0) -> str:
    """The line of the person's paste that hit `n` matched: the error line that reproduced the
    entry's signature, quoted as it was pasted so the reader sees why this entry was chosen."""
    sig = result.hits[n].matched_signature if len(result.hits) > n else None
    if not sig:
        return ""
    words = _words(sig)
    read = result.post.errors if result.post else result.signature_lines
    best = max((ln for ln in read if ln.strip()), key=lambda ln: len(words & _words(ln)), default="")
    if not best or len(words & _words(best)) * 2 < len(words):
        return ""  # the entry's own line is not a line of the paste: the doors quote nothing
    return _as_pasted(best, result.query).strip()[:300]


def _as_pasted(line: str, query: str) -> str:
    """The pasted line the post reader read as `line` (it normalises: "[Rank 3]" loses its 3),
    without terminal colours; `line` itself when no pasted line holds nearly all its words."""
    want = _words(line)
    if not want:
        return line
    key = max(want, key=len)
    pasted = query.splitlines()
    if len(pasted) > 2 * QUOTED_LINES:
        pasted = pasted[:QUOTED_LINES] + pasted[-QUOTED_LINES:]
    found, share = line, 0.9  # at least this share of its words
    for raw in pasted:
        if key in raw.lower():
            s = len(want & _words(raw)) / len(want)
            if s > share or (s == share and found is line):
                found, share = _CONTROL.sub("", without_colours(raw)), s
    return found
