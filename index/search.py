"""Post -> ranked entries: read the post, gather candidates, weigh the evidence, decide.

Flow (see DESIGN.md):
1. index/post.py reads the paste into parts (title, prose, error lines, exceptions, codes) and
   drops the noise; the person's own words decide the answer language.
2. Candidates: the entries nearest to each part in meaning (each part is embedded on its own)
   and the entries BM25 selects from the parts' words, error codes included.
3. index/features.py measures each candidate's evidence; index/ranker.py scores it with weights
   fitted on real posts (eval/fit.py) and groups an entry with its translation, the reader's
   language first.
4. The gate (also fitted) gives the probability that the top answer is right; below its
   threshold the result is "no match" with the nearest entries as suggestions.

Measured on ../shared/eval/real_dev.jsonl (real issue-tracker posts, cross-validated; see
eval/results/fit.md): the hand-weighted fusion this replaces put the right entry first for 25%
of the posts over the seed documents and 44% over the corpus, and its hand-set gate answered 26
of 31 unanswerable posts.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from threading import Lock

import numpy as np

from ingest.entry import Entry
from ingest.lang import cjk_count

from .codes import conflicts, error_codes
from .embed import Embedder
from .features import (
    FEATURES,
    View,
    coverage,
    dense_evidence,
    entry_shape,
    informative,
    lexical_query_text,
    post_views,
    title_tokens,
)
from .post import Post, read_post
from .ranker import GATE_FEATURES, RankModel, load_model, query_shape, softmax_by_group
from .store import LoadedIndex
from .text import clean_line, tokenize
from .views import lexical_tokens

CANDIDATES = 40  # entries taken from each leg
DENSE_DEPTH = 200  # rows asked of the vector index per view
MIN_COVERAGE_WORDS = 4  # a view needs this many informative words to count for query_coverage
QUERY_CACHE_SIZE = 512
QUERY_CACHE_KEY_CHARS = 600  # views are at most this long; longer keys are not cached


@dataclass(frozen=True)
class Hit:
    entry: Entry
    score: float  # ranking score, for ordering only
    dense_rank: int | None  # 1-based rank in the dense leg, None when outside its candidates
    lexical_rank: int | None
    dense_score: float  # best cosine between a post view and one of the entry's rows
    matched_signature: str | None  # the entry signature a post error line reproduced, if any
    translation: Entry | None = None  # the same FAQ in the other language


@dataclass(frozen=True)
class SearchResult:
    query: str
    lang: str
    no_match: bool
    hits: list[Hit]
    suggestions: list[Hit] = field(default_factory=list)  # nearest entries when no_match
    signature_lines: tuple[str, ...] = ()  # the post's error lines, most telling first
    confidence: float | None = None  # the gate's probability that the top answer is right
    post: Post | None = None
    weak: bool = False  # answered, but below the model's confident level: the closest entry, maybe not it

    @property
    def strength(self) -> str:
        """"match", "weak" (the closest entry, which may not be the problem) or "none"."""
        return "none" if self.no_match else ("weak" if self.weak else "match")


@dataclass
class Candidates:
    """One post's candidates and their evidence: everything the model needs, so that
    evaluation can refit the model without searching again."""

    post: Post
    lang: str
    views: list[View]
    entries: np.ndarray  # candidate entry indexes
    x: np.ndarray  # (len(entries), len(names))
    dense: np.ndarray  # best cosine per candidate
    dense_rank: dict[int, int]
    lexical_rank: dict[int, int]
    matched: dict[int, str]  # entry index -> the signature a post line reproduced
    names: tuple[str, ...] = FEATURES  # the columns of x


class _LruCache:
    """A small thread-safe LRU map. Keys are bounded in length by the callers, so memory is
    bounded by size x key length, whatever the queries (the old per-line caches grew with
    every unique 2 MB line)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._d: OrderedDict = OrderedDict()
        self._lock = Lock()

    def get(self, key):
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def put(self, key, value) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)


_VECTORS: dict[str, _LruCache] = {}  # embedder id -> view text -> vector; survives index reloads


def _vector_cache(embedder: Embedder) -> _LruCache:
    cache = _VECTORS.get(embedder.id)
    if cache is None:
        cache = _VECTORS.setdefault(embedder.id, _LruCache(QUERY_CACHE_SIZE))
    return cache


class Searcher:
    def __init__(self, index: LoadedIndex, embedder: Embedder, model: RankModel | None = None) -> None:
        self.index = index
        self.embedder = embedder
        self._model = model
        self._by_id = index.by_id
        idf = index.bm25.idf
        self._idf_max = float(idf.max()) if len(idf) else 1.0
        self._entry_info: dict[int, tuple] = {}  # entry index -> (tokens, title tokens, codes, signature token sets)
        self._info_lock = Lock()

    @property
    def model(self) -> RankModel:
        """The ranking model, read when first needed (gathering candidates does not need one,
        so eval/fit.py can run before any model exists)."""
        if self._model is None:
            self._model = load_model()
        return self._model

    # ---- per-entry facts, computed once per index -------------------------------------------
    def _info(self, i: int) -> tuple:
        info = self._entry_info.get(i)
        if info is None:
            e = self.index.entries[i]
            sigs = [(s, frozenset(informative(tokenize(clean_line(s)[:1000])))) for s in e.signatures]
            info = (
                frozenset(lexical_tokens(e)),
                title_tokens(e),
                error_codes(e.title + "\n" + e.body),
                tuple(x for x in sigs if len(x[1]) >= 2),
                entry_shape(e),
            )
            with self._info_lock:
                self._entry_info[i] = info
        return info

    def _idf(self, token: str) -> float:
        """Rarity of a token in this index; a token the index never saw counts as the rarest."""
        j = self.index.bm25.vocab.get(token)
        return float(self.index.bm25.idf[j]) if j is not None else self._idf_max

    def _known_share(self, tokens: list[str]) -> float:
        """How much of the query (by rarity) the index's vocabulary contains at all. A Chinese
        question over English entries shares only `MindSpore` with them: its BM25 ranking is
        noise and should weigh accordingly."""
        distinct = set(tokens)
        total = sum(self._idf(t) for t in distinct)
        vocab = self.index.bm25.vocab
        return sum(self._idf(t) for t in distinct if t in vocab) / total if total > 0 else 0.0

    def specific_first(self, lines: tuple[str, ...]) -> tuple[str, ...]:
        """Error lines in the post reader's order, refined by how specific they are to this
        index (the rarity of their three rarest known tokens): `Init plugin so failed, ret =
        1343225860` before `Init hccl failed, please check the ERROR log above`."""
        if len(lines) < 2:
            return lines
        vocab = self.index.bm25.vocab
        n = len(lines)

        def key(item: tuple[int, str]) -> float:
            pos, line = item
            known = sorted((self._idf(t) for t in set(tokenize(line)) if t in vocab), reverse=True)[:3]
            return -(sum(known) / (3 * self._idf_max) + (n - pos) / n)

        return tuple(line for _, line in sorted(enumerate(lines), key=key))

    # ---- the two legs -----------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        cache = _vector_cache(self.embedder)
        out: list[np.ndarray | None] = [
            cache.get(t) if len(t) <= QUERY_CACHE_KEY_CHARS else None for t in texts
        ]
        todo = [i for i, v in enumerate(out) if v is None]
        if todo:
            fresh = self.embedder.embed([texts[i] for i in todo])
            for i, v in zip(todo, fresh, strict=True):
                out[i] = v
                if len(texts[i]) <= QUERY_CACHE_KEY_CHARS:
                    cache.put(texts[i], v)
        return np.stack(out)

    def candidates(self, query: str, lang: str | None = None) -> Candidates:
        post = read_post(query)
        if post.errors:
            post = _with_errors(post, self.specific_first(post.errors))
        reader_lang = lang or post.lang
        entries = self.index.entries
        n = len(entries)
        views = post_views(post)
        empty = np.zeros((0, len(FEATURES)), dtype=np.float32)
        if n == 0:
            return Candidates(post, reader_lang, views, np.zeros(0, dtype=np.int64), empty, np.zeros(0), {}, {}, {})

        qv = self._embed([v.text for v in views])
        scores, rows = self.index.vectors.search(qv, DENSE_DEPTH)
        ev = dense_evidence(views, scores, rows, self.index.row_entry, self.index.row_kind, n)
        dense_order = [int(i) for i in np.argsort(-ev.best)[:CANDIDATES] if ev.best[i] > -1]

        tokens = tokenize(lexical_query_text(post)) + sorted(post.codes)
        bm, bm_best = self.index.bm25.scores(tokens)
        lex_order = [int(i) for i in np.argsort(-bm)[:CANDIDATES] if bm[i] > 0]

        cand = list(dict.fromkeys(dense_order + lex_order))
        # An entry's translation is a candidate too: the pair is one FAQ, shown in the reader's language.
        for i in list(cand):
            t = entries[i].translation
            j = self._by_id.get(t) if t else None
            if j is not None and j not in cand:
                cand.append(j)
        idx = np.asarray(cand, dtype=np.int64)
        dense_rank = {e: r for r, e in enumerate(dense_order, 1)}
        lex_rank = {e: r for r, e in enumerate(lex_order, 1)}
        x, matched = self._features(post, views, reader_lang, idx, ev, bm, bm_best, tokens, dense_rank, lex_rank)
        dense = np.where(ev.best[idx] > -1, ev.best[idx], ev.floor)
        return Candidates(post, reader_lang, views, idx, x, dense, dense_rank, lex_rank, matched)

    def _features(self, post, views, reader_lang, idx, ev, bm, bm_best, tokens, dense_rank, lex_rank):
        floor = ev.floor
        top_bm = float(bm[idx].max()) if len(idx) and bm[idx].max() > 0 else 1.0
        known = self._known_share(tokens)
        query_tokens = informative(tokens)
        key_views = [informative(tokenize(v.text)) for v in views[:3]]
        key_views = [w for w in key_views if len(w) >= MIN_COVERAGE_WORDS]
        title_view = informative(tokenize(post.title)) if post.title else set()
        sig_lines = [frozenset(informative(tokenize(s))) for s in (post.title, *post.errors, *post.exceptions[:2]) if s]
        sig_lines = [s for s in sig_lines if s]
        x = np.zeros((len(idx), len(FEATURES)), dtype=np.float32)
        matched: dict[int, str] = {}
        col = {f: k for k, f in enumerate(FEATURES)}
        for r, i in enumerate(idx):
            i = int(i)
            toks, ttoks, codes, sigs, shape = self._info(i)
            e = self.index.entries[i]

            def cos(a: np.ndarray) -> float:
                return float(a[i]) if a[i] > -1 else floor

            seen = ev.per_view[:, i]
            row = {
                "dense_max": cos(ev.best),
                "dense_title_view": float(ev.by_view["title"][i]),
                "dense_prose_view": float(ev.by_view["prose"][i]),
                "dense_error_view": float(ev.by_view["error"][i]),
                "dense_mean": float(np.where(seen > -1, seen, floor).mean()) if len(seen) else floor,
                "dense_to_title": cos(ev.by_row["title"]),
                "dense_to_signature": cos(ev.by_row["signature"]) if e.signatures else floor,
                "dense_to_answer": cos(ev.by_row["answer"]),
                "dense_rank": 1.0 / np.log2(1 + dense_rank[i]) if i in dense_rank else 0.0,
                "bm25_rel": float(bm[i]) / top_bm,
                "bm25_abs": float(bm[i]) / bm_best if bm_best > 0 else 0.0,
                "bm25_known": known * float(bm[i]) / top_bm,
                "lexical_rank": 1.0 / np.log2(1 + lex_rank[i]) if i in lex_rank else 0.0,
                "title_coverage": coverage(ttoks, query_tokens, self._idf) if ttoks else 0.0,
                "query_coverage": max((coverage(w, toks, self._idf) for w in key_views), default=0.0),
                "code_match": 1.0 if post.codes & codes else 0.0,
                "code_conflict": 1.0 if conflicts(post.codes, codes) else 0.0,
                "same_lang": 1.0 if e.lang == reader_lang else 0.0,
                "entry_has_signatures": 1.0 if e.signatures else 0.0,
                "entry_is_question": shape[0],
                "entry_is_section": shape[1],
                "entry_lines": shape[2],
                "title_view_coverage": coverage(title_view, ttoks, self._idf) if title_view else 0.0,
            }
            best_sig, which = 0.0, None
            for q in sig_lines:
                for sig, st in sigs:
                    s = coverage(st, q, self._idf) * min(1.0, len(st) / 4)  # short signatures match by chance
                    if s > best_sig:
                        best_sig, which = s, sig
            row["signature_overlap"] = best_sig
            if which is not None and best_sig >= 0.6:
                matched[i] = which
            for f, v in row.items():
                x[r, col[f]] = v
        return x, matched

    # ---- ranking and the decision -------------------------------------------------------------
    def rank(self, c: Candidates, model: RankModel | None = None) -> tuple[list[tuple[int, int | None, float]], np.ndarray]:
        """FAQs best first as (shown entry, its translation, score); and the gate's row."""
        model = model or self.model
        if len(c.entries) == 0:
            return [], np.zeros(len(GATE_FEATURES))
        s = model.rank(model.rank.select(c.x, c.names))
        order = np.argsort(-s, kind="stable")
        entries = self.index.entries
        pos = {int(e): k for k, e in enumerate(c.entries)}
        faqs: list[tuple[int, int | None, float]] = []
        used: set[int] = set()
        for k in order:
            i = int(c.entries[k])
            if i in used:
                continue
            t = entries[i].translation
            j = self._by_id.get(t) if t else None
            used.add(i)
            if j is not None:
                used.add(j)
            shown, other = i, j
            if j is not None and entries[i].lang != c.lang and entries[j].lang == c.lang:
                shown, other = j, i
            faqs.append((shown, other, float(s[k])))
        return faqs, self._gate_row(c, faqs, s, pos)

    def _gate_row(self, c: Candidates, faqs, s: np.ndarray, pos: dict[int, int]) -> np.ndarray:
        members = [pos[m] for m in (faqs[0][0], faqs[0][1]) if m is not None and m in pos]
        top_x = c.x[members].max(axis=0)
        scores = np.array([f[2] for f in faqs])
        prob = softmax_by_group(scores, np.zeros(len(scores), dtype=np.int64))[0]
        col = {f: k for k, f in enumerate(c.names)}
        have = frozenset().union(*(self._info(m)[0] for m in (faqs[0][0], faqs[0][1]) if m is not None))
        main = informative(tokenize(_main_line(c.post)))
        known = {t for t in main if t in self.index.bm25.vocab}
        missing = [self._idf(t) for t in known - have]
        error_lines = [informative(tokenize(x)) for x in (*c.post.exceptions[:1], *c.post.errors[:2])]
        row = {
            "error_coverage": max((coverage(w, have, self._idf) for w in error_lines if w), default=1.0),
            "main_coverage": coverage(main, have, self._idf) if main else 0.0,
            "known_rare_missing": max(missing, default=0.0) / self._idf_max,
            "known_missing_share": len(known - have) / len(known) if known else 0.0,
            "unknown_share": 1.0 - len(known) / len(main) if main else 0.0,
            "top_score": faqs[0][2],
            "margin": faqs[0][2] - faqs[1][2] if len(faqs) > 1 else 5.0,
            "top_prob": prob,
            "has_title": 1.0 if c.post.title else 0.0,
            "has_prose": 1.0 if c.post.prose else 0.0,
            "has_errors": 1.0 if c.post.errors else 0.0,
        }
        return np.array([row[f] if f in row else top_x[col[f]] for f in GATE_FEATURES], dtype=np.float64)

    def search(self, query: str, k: int = 5, lang: str | None = None) -> SearchResult:
        c = self.candidates(query, lang)
        return self.decide(query, c, k)

    def decide(self, query: str, c: Candidates, k: int = 5, model: RankModel | None = None) -> SearchResult:
        model = model or self.model
        sigs = c.post.errors
        faqs, gate_row = self.rank(c, model)
        if not faqs:
            return SearchResult(query, c.lang, True, [], [], sigs, None, c.post)
        if not self._has_content(c):
            # Nothing in the query is a word this index knows or could translate: emoji, binary
            # junk, `" OR 1=1 --`. Whatever ranked first, it ranked first by chance.
            hits = [self._hit(c, shown, other, score) for shown, other, score in faqs[:k]]
            return SearchResult(query, c.lang, True, [], hits, sigs, 0.0, c.post)
        hits = [self._hit(c, shown, other, score) for shown, other, score in faqs[:k]]
        conf = float(model.confidence(model.gate.select(gate_row[None, :], GATE_FEATURES))[0])
        if conf < model.threshold(query_shape(c.post.title, c.post.lines_total)):
            return SearchResult(query, c.lang, True, [], hits, sigs, conf, c.post)
        return SearchResult(query, c.lang, False, hits, [], sigs, conf, c.post, conf < model.confident)

    def _has_content(self, c: Candidates) -> bool:
        words = informative(tokenize(" ".join(v.text for v in c.views)))
        vocab = self.index.bm25.vocab
        return any(t in vocab or cjk_count(t) for t in words)

    def _hit(self, c: Candidates, shown: int, other: int | None, score: float) -> Hit:
        entries = self.index.entries
        members = [m for m in (shown, other) if m is not None]
        where = {int(e): k for k, e in enumerate(c.entries)}
        dense = max(float(c.dense[where[m]]) for m in members if m in where)
        matched = next((c.matched[m] for m in members if m in c.matched), None)
        return Hit(
            entry=entries[shown],
            score=score,
            dense_rank=min((c.dense_rank[m] for m in members if m in c.dense_rank), default=None),
            lexical_rank=min((c.lexical_rank[m] for m in members if m in c.lexical_rank), default=None),
            dense_score=dense,
            matched_signature=matched,
            translation=entries[other] if other is not None else None,
        )


def _main_line(post: Post) -> str:
    """The line that says what the post is about: its title, else its most telling error line,
    else what the person wrote."""
    return post.title or (post.errors[0] if post.errors else post.question)


def _with_errors(post: Post, errors: tuple[str, ...]) -> Post:
    from dataclasses import replace

    return replace(post, errors=errors)
