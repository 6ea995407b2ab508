"""What an index knows about its words and its entries, for weighing evidence.

`Vocabulary` answers how rare a token is in the index (a token the index never saw counts as
the rarest) and how much of one token set another covers, weighted by rarity. `EntryFacts`
holds, per entry, what the features compare a post with: its tokens, its title's tokens, its
error codes, its signatures as token sets and its shape. Both fill in lazily and are bounded by
the index (unknown query tokens are never cached: a stream of unique junk cannot grow them).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ingest.entry import Entry

from .codes import error_codes
from .seams import LexicalIndex
from .text import clean_line, tokenize
from .views import lexical_tokens


def informative(tokens: Iterable[str]) -> set[str]:
    """Tokens that carry meaning on their own: not short numbers."""
    return {t for t in tokens if not t.isdigit() or len(t) >= 3}


def title_tokens(entry: Entry) -> set[str]:
    return informative(tokenize(clean_line(entry.title)))


_QUESTION_TITLE = re.compile(
    r"[?？]\s*$|^\s*(Q\d*|问题)\s*[:：]|^\s*(how|what|why|when|which|can|does|is|should)\b|怎么|如何|为什么|吗",
    re.I,
)
_SECTION_TITLE = re.compile(r"^\s*(\d+(\.\d+)*\.?|[一二三四五六七八九十]+[、.])\s*\S")


def entry_shape(entry: Entry) -> tuple[float, float, float]:
    """What kind of entry it is: a question, a numbered section of a guide, how long."""
    return (
        1.0 if _QUESTION_TITLE.search(entry.title) else 0.0,
        1.0 if _SECTION_TITLE.match(entry.title) else 0.0,
        float(np.log1p(entry.end_line - entry.start_line + 1)),
    )


class Vocabulary:
    """Rarity of tokens, read through the lexical index's seam (index/seams.py)."""

    def __init__(self, lexical: LexicalIndex) -> None:
        self._lexical = lexical
        self.idf_max = lexical.max_idf
        self._known: dict[str, float] = {}  # grows at most to the vocabulary

    def __contains__(self, token: str) -> bool:
        return token in self._lexical

    def idf(self, token: str) -> float:
        v = self._known.get(token)
        if v is None:
            found = self._lexical.idf(token)
            if found is None:
                return self.idf_max
            v = self._known[token] = found
        return v

    def coverage(self, want: Iterable[str], have: frozenset[str] | set[str]) -> float:
        """Share of `want`, weighted by rarity, that `have` contains."""
        total = covered = 0.0
        for t in want:
            w = self.idf(t)
            total += w
            if t in have:
                covered += w
        return covered / total if total > 0 else 0.0

    def known_share(self, tokens: Iterable[str]) -> float:
        """How much of a query (by rarity) the index's vocabulary contains at all. A Chinese
        question over English entries shares only `MindSpore` with them: its BM25 ranking is
        noise and should weigh accordingly."""
        distinct = set(tokens)
        total = sum(self.idf(t) for t in distinct)
        return sum(self.idf(t) for t in distinct if t in self._lexical) / total if total > 0 else 0.0

    def specificity(self, line: str) -> float:
        """The rarity of a line's three rarest known tokens, 0..1."""
        known = sorted((self.idf(t) for t in set(tokenize(line)) if t in self._lexical), reverse=True)[:3]
        return sum(known) / (3 * self.idf_max)


@dataclass(frozen=True)
class Facts:
    tokens: frozenset[str]
    title_tokens: set[str]
    codes: frozenset[str]
    signatures: tuple[tuple[str, frozenset[str]], ...]  # (signature, its informative tokens)
    is_question: float
    is_section: float
    lines: float


class EntryFacts:
    def __init__(self, entries: list[Entry]) -> None:
        self._entries = entries
        self._facts: dict[int, Facts] = {}
        self._lock = threading.Lock()

    def __getitem__(self, i: int) -> Facts:
        f = self._facts.get(i)
        if f is None:
            e = self._entries[i]
            sigs = ((s, frozenset(informative(tokenize(clean_line(s)[:1000])))) for s in e.signatures)
            f = Facts(
                frozenset(lexical_tokens(e)),
                title_tokens(e),
                error_codes(e.title + "\n" + e.body),
                tuple(x for x in sigs if len(x[1]) >= 2),
                *entry_shape(e),
            )
            with self._lock:
                self._facts[i] = f
        return f
