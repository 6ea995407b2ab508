"""Query -> ranked entries: query views, dense + lexical legs, fusion, translations, no-match.

Flow (see DESIGN.md): read the query (log or question), embed its signature lines, the question
and the cleaned text; BM25 over signature + question tokens; reciprocal rank fusion of the legs
plus a signature-overlap leg; group rows into entries; put the reader's language first; decide
whether anything matches well enough to be shown as an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ingest.entry import Entry

from .embed import Embedder
from .store import LoadedIndex
from .text import QueryText, clean_line, read_query, tokenize

# Reciprocal rank fusion constant: the usual 60 (Cormack et al. 2009); it flattens the
# difference between rank 1 and rank 3 of one leg so that agreement between legs wins.
RRF_K = 60
CANDIDATES = 50  # rows/entries taken from each leg before fusion

@dataclass(frozen=True)
class Gate:
    """The no-match decision. An answer is shown when any of these holds for the top entry:
    a query error line matches one of its signatures; the dense similarity of the query to its
    title/signature/answer is high; or both legs put it first and the similarity is fair.
    Numbers calibrated on eval/ gold sets (see eval/calibrate.py); they depend on the embedder."""

    signature_overlap: float = 0.55
    dense_alone: float = 0.62
    dense_with_agreement: float = 0.45
    lexical_coverage: float = 0.55

@dataclass(frozen=True)
class Hit:
    entry: Entry
    score: float  # fused score (RRF), for ordering only
    dense_rank: int | None  # 1-based rank in the dense leg, None when outside its candidates
    lexical_rank: int | None
    dense_score: float  # best cosine between a query view and one of the entry's rows
    matched_signature: str | None  # the entry signature a query error line matched, if any
    translation: Entry | None = None  # the same FAQ in the other language

@dataclass(frozen=True)
class SearchResult:
    query: str
    lang: str
    no_match: bool
    hits: list[Hit]
    suggestions: list[Hit] = field(default_factory=list)  # nearest entries when no_match
    signature_lines: tuple[str, ...] = ()

def _sig_tokens(text: str) -> frozenset[str]:
    return frozenset(t for t in tokenize(clean_line(text)) if not t.isdigit() or len(t) >= 3)

@lru_cache(maxsize=200_000)
def _entry_sig_tokens(sig: str) -> frozenset[str]:
    return _sig_tokens(sig)

def signature_overlap(query_sigs: tuple[str, ...], entry: Entry) -> tuple[float, str | None]:
    """How much of an entry's error line a query error line reproduces (0..1), and which line.

    Containment of the entry signature's tokens in the query line: a user's line carries extra
    run-specific words, the FAQ's line is the canonical part.
    """
    best, which = 0.0, None
    for q in query_sigs:
        qt = _sig_tokens(q)
        if not qt:
            continue
        for sig in entry.signatures:
            st = _entry_sig_tokens(sig)
            if len(st) < 2:
                continue
            score = len(qt & st) / len(st)
            # Short FAQ signatures (3 tokens) are easy to contain by chance; ask for more.
            score *= min(1.0, len(st) / 4)
            if score > best:
                best, which = score, sig
    return best, which

class Searcher:
    def __init__(self, index: LoadedIndex, embedder: Embedder, gate: Gate | None = None) -> None:
        self.index = index
        self.embedder = embedder
        self.gate = gate or Gate()
        self._by_id = index.by_id

    @lru_cache(maxsize=4096)  # noqa: B019 - one Searcher per loaded index; repeated pastes are common
    def _embed_cached(self, text: str) -> np.ndarray:
        return self.embedder.embed([text])[0]

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._embed_cached(t) for t in texts])

    def query_views(self, q: QueryText) -> list[str]:
        views: list[str] = []
        views.extend(q.signature_lines[:3])
        if q.question:
            views.append(q.question[:1000])
        if not q.is_log:
            views.append(q.cleaned[:1000])
        elif not q.signature_lines and not q.question:
            # A log with no error line: its last lines are the best guess of what went wrong.
            views.append("\n".join(q.cleaned.split("\n")[-8:])[:1000])
        return list(dict.fromkeys(v for v in views if v.strip())) or [q.cleaned[:1000] or " "]

    def lexical_query(self, q: QueryText) -> list[str]:
        if q.is_log:
            parts = [*q.signature_lines, *q.signature_lines[:2], q.question]
            if not q.signature_lines:
                parts.append("\n".join(q.cleaned.split("\n")[-20:]))
            text = "\n".join(parts)
        else:
            text = q.cleaned
        return tokenize(text[:20000])

    def search(self, query: str, k: int = 5, lang: str | None = None) -> SearchResult:
        q = read_query(query)
        reader_lang = lang or q.raw_lang
        entries = self.index.entries
        n = len(entries)
        if n == 0:
            return SearchResult(query, reader_lang, True, [], [], q.signature_lines)

        # Dense leg: best cosine per entry over all (query view, entry row) pairs.
        qv = self._embed(self.query_views(q))
        scores, rows = self.index.vectors.search(qv, CANDIDATES * 4)
        dense = np.full(n, -1.0, dtype=np.float32)
        for s_row, r_row in zip(scores, rows, strict=True):
            for s, r in zip(s_row, r_row, strict=True):
                if r >= 0:
                    e = self.index.row_entry[r]
                    if s > dense[e]:
                        dense[e] = s
        dense_order = [int(i) for i in np.argsort(-dense)[:CANDIDATES] if dense[i] > -1]

        # Lexical leg.
        bm, best_possible = self.index.bm25.scores(self.lexical_query(q))
        lex_order = [int(i) for i in np.argsort(-bm)[:CANDIDATES] if bm[i] > 0]

        # Signature leg: exact-ish error line overlap among the candidates.
        candidates = list(dict.fromkeys(dense_order + lex_order))
        overlap: dict[int, tuple[float, str | None]] = {}
        if q.signature_lines:
            for i in candidates:
                overlap[i] = signature_overlap(q.signature_lines, entries[i])
        sig_order = sorted((i for i in candidates if overlap.get(i, (0,))[0] >= 0.5), key=lambda i: -overlap[i][0])

        fused: dict[int, float] = {}
        dense_rank = {e: r for r, e in enumerate(dense_order, 1)}
        lex_rank = {e: r for r, e in enumerate(lex_order, 1)}
        for order in (dense_order, lex_order, sig_order):
            for r, e in enumerate(order, 1):
                fused[e] = fused.get(e, 0.0) + 1.0 / (RRF_K + r)
        ranked = sorted(fused, key=lambda e: (-fused[e], -dense[e]))

        hits = self._group_translations(ranked, reader_lang, fused, dense, dense_rank, lex_rank, overlap)
        top = hits[0] if hits else None
        no_match = top is None or not self._confident(top, bm, best_possible, dense_order, lex_order)
        if no_match:
            return SearchResult(query, reader_lang, True, [], hits[:k], q.signature_lines)
        return SearchResult(query, reader_lang, False, hits[:k], [], q.signature_lines)

    def _confident(self, top: Hit, bm: np.ndarray, best_possible: float, dense_order, lex_order) -> bool:
        g = self.gate
        i = self._by_id[top.entry.id]
        agree = bool(dense_order and lex_order and dense_order[0] == lex_order[0])
        coverage = float(bm[i] / best_possible) if best_possible > 0 else 0.0
        sig = 1.0 if top.matched_signature else 0.0
        return (
            sig >= 1.0
            or top.dense_score >= g.dense_alone
            or (agree and top.dense_score >= g.dense_with_agreement)
            or (coverage >= g.lexical_coverage and top.dense_score >= g.dense_with_agreement)
        )

    def _group_translations(self, ranked, reader_lang, fused, dense, dense_rank, lex_rank, overlap) -> list[Hit]:
        """One hit per FAQ: the reader's language first, the other language beside it."""
        entries = self.index.entries
        hits: list[Hit] = []
        used: set[int] = set()
        for i in ranked:
            if i in used:
                continue
            e = entries[i]
            partner_idx = self._by_id.get(e.translation) if e.translation else None
            used.add(i)
            if partner_idx is not None:
                used.add(partner_idx)
            shown, other = i, partner_idx
            if partner_idx is not None and e.lang != reader_lang and entries[partner_idx].lang == reader_lang:
                shown, other = partner_idx, i
            ov, sig = max(overlap.get(i, (0.0, None)), overlap.get(partner_idx, (0.0, None)) if partner_idx is not None else (0.0, None), key=lambda t: t[0])
            hits.append(
                Hit(
                    entry=entries[shown],
                    score=float(fused[i]),
                    dense_rank=dense_rank.get(i),
                    lexical_rank=lex_rank.get(i),
                    dense_score=float(max(dense[i], dense[partner_idx] if partner_idx is not None else -1)),
                    matched_signature=sig if ov >= self.gate.signature_overlap else None,
                    translation=entries[other] if other is not None else None,
                )
            )
        return hits
