"""Answers: the Answer record, the extractive answer (default, offline) and its citations.

The LLM answer (kb/llm.py) builds on the same records and falls back to `extractive()`; what an
answer shows, and with which labels and cautions, is decided in kb/present.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from index.search import Hit, SearchResult
from index.text import without_colours
from ingest.entry import Entry

from .entry_text import key_text, without_code
from .labels import LABELS


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
    body = without_code(key_text(best), lang) if result.weak else key_text(best)
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
