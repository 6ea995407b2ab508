"""Post -> ranked entries: read the post, gather candidates, weigh the evidence, decide.

Flow (see DESIGN.md):
1. index/post.py reads the paste into parts (title, prose, error lines, exceptions, codes) and
   drops the noise; the person's own words decide the answer language.
2. Candidates: the entries nearest to each part in meaning (each part is embedded on its own)
   and the entries BM25 selects from the parts' words, error codes included.
3. index/features.py measures each candidate's evidence; index/ranker.py scores it with weights
   fitted on real posts (eval/fit.py) and groups an entry with its translation, the reader's
   language first.
4. Two gates (also fitted): below the answered gate's threshold the result is "no match" with
   the nearest entries as suggestions; the right gate's probability that the top answer is right
   (the result's confidence) decides whether it is a match or the closest entry.

Measured on ../shared/eval/real_dev.jsonl (real issue-tracker posts, cross-validated; see
eval/results/fit.md): the hand-weighted fusion this replaces put the right entry first for 25%
of the posts over the seed documents and 44% over the corpus, and its hand-set gate answered 26
of 31 unanswerable posts.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from threading import Lock

import numpy as np

from ingest.entry import Entry
from ingest.lang import cjk_count

from .codes import names_something_else
from .evidence import Vocabulary, informative, names_nothing, own_words
from .features import (
    FEATURES,
    PRECEDENT_FEATURES,
    Legs,
    View,
    candidate_features,
    dense_evidence,
    lexical_query_text,
    post_views,
)
from .gate import gate_row, unshared_and_far
from .lead_ins import sections_first
from .post import Post, read_post
from .precedents import Precedents, precedent_text
from .ranker import GATE_FEATURES, SMALL_INDEX, RankModel, load_model, query_shape, smallness
from .seams import Embedder
from .store import LoadedIndex
from .text import tokenize
from .timing import NO_PHASES, Phases

CANDIDATES = SMALL_INDEX  # entries taken from each leg (so a smaller index is all candidates)
# Rows asked of the vector index per view. A candidate outside a view's rows gets, for that view,
# the lowest best cosine of any entry seen (index/features.py dense_evidence's floor). Tried at
# stop 59: 1000 rows, so that more of the corpus's BM25-only candidates get their real cosines.
# Real posts, 5 folds x 3 splits, without the held-out gate drafts: ranking Hit@1 0.660 -> 0.651,
# Hit@5 0.846 -> 0.849. That is within the spread, so the depth stays.
DENSE_DEPTH = 200
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
    hits: list[Hit]  # empty when nothing matches
    suggestions: list[Hit] = field(default_factory=list)  # nearest entries when no_match
    signature_lines: tuple[str, ...] = ()  # the post's error lines, most telling first
    confidence: float | None = None  # the right gate's probability that the top answer is right
    post: Post | None = None
    weak: bool = False  # answered, but below the model's confident level: the closest entry, maybe not it
    vague: bool = False  # no match because the query names nothing specific ("it does not work")
    # The answered gate's probability that the index answers the query, which the no-match
    # thresholds read (0 when turned away before the gate; None without candidates).
    answered: float | None = None

    @property
    def no_match(self) -> bool:
        return not self.hits

    @property
    def strength(self) -> str:
        """ "match", "weak" (the closest entry, which may not be the problem) or "none"."""
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
    gap: float = 0.0  # the post's lead towards a gap (index/precedents.py Precedents.gap)


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


def forget_query_vectors() -> None:
    """Empty the query-vector cache (a benchmark times every query's embedding)."""
    _VECTORS.clear()


def questions(index: LoadedIndex) -> int:
    """How many questions an index answers: an entry and its translation are one."""
    seen: set[int] = set()
    count = 0
    for i, e in enumerate(index.entries):
        if i in seen:
            continue
        count += 1
        j = index.by_id.get(e.translation) if e.translation else None
        if j is not None:
            seen.add(j)
    return count


class Searcher:
    """Searches one loaded index. `phases` is the timing hook: when given, the seconds spent
    reading the post ("clean"), embedding ("embed"), in the vector index ("faiss"), in the
    lexical index ("bm25") and on the features ("features") are added to it (eval/bench.py)."""

    def __init__(
        self,
        index: LoadedIndex,
        embedder: Embedder,
        model: RankModel | None = None,
        phases: Phases | None = None,
        precedents: Precedents | None = None,
    ) -> None:
        """precedents: earlier posts of this index and their answers (index/precedents.py)."""
        self.index = index
        self.embedder = embedder
        self._model = model
        self._by_id = index.by_id
        self.vocab = Vocabulary(index.lexical)
        self.facts = index.facts()
        self.phases = phases or NO_PHASES
        self.smallness = smallness(questions(index))
        self.precedents = precedents or Precedents.empty()

    @property
    def model(self) -> RankModel:
        """The ranking model, read when first needed (gathering candidates does not need one,
        so eval/fit.py can run before any model exists); with precedents, its model for them."""
        if self._model is None:
            self._model = load_model()
        return self._model.for_index(self.precedents.enough, self.precedents.enough_gaps)

    def specific_first(self, lines: tuple[str, ...]) -> tuple[str, ...]:
        """Error lines in the post reader's order, refined by how specific they are to this
        index: `Init plugin so failed, ret = 1343225860` before `Init hccl failed, please check
        the ERROR log above`."""
        if len(lines) < 2:
            return lines
        n = len(lines)
        order = sorted(enumerate(lines), key=lambda p: -(self.vocab.specificity(p[1]) + (n - p[0]) / n))
        return tuple(line for _, line in order)

    # ---- the two legs -----------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        cache = _vector_cache(self.embedder)
        out: list[np.ndarray | None] = [
            cache.get(t) if len(t) <= QUERY_CACHE_KEY_CHARS else None for t in texts
        ]
        todo = [i for i, v in enumerate(out) if v is None]
        if todo:
            with self.phases("embed"):
                fresh = self.embedder.embed_queries([texts[i] for i in todo])
            for i, v in zip(todo, fresh, strict=True):
                out[i] = v
                if len(texts[i]) <= QUERY_CACHE_KEY_CHARS:
                    cache.put(texts[i], v)
        return np.stack([v for v in out if v is not None])  # every one is filled by now

    def read(self, query: str) -> tuple[Post, list[View]]:
        """The post as this index reads it (its error lines by how specific they are here), and
        what of it is embedded."""
        with self.phases("clean"):
            post = read_post(query)
        if post.errors:
            post = replace(post, errors=self.specific_first(post.errors))
        return post, post_views(post)

    def candidates(self, query: str, lang: str | None = None) -> Candidates:
        post, views = self.read(query)
        reader_lang = lang or post.lang
        entries = self.index.entries
        if not entries:
            empty = np.zeros((0, len(FEATURES)), dtype=np.float32)
            return Candidates(
                post, reader_lang, views, np.zeros(0, dtype=np.int64), empty, np.zeros(0), {}, {}, {}
            )
        legs = self._legs(post, views)
        idx = self._candidate_entries(legs)
        with self.phases("features"):
            # The post's own language, not the one asked for: choosing English for a Chinese
            # question picks which version is shown, not how sure the match is (it turned a match
            # into "closest entry" and hid the commands).
            precedent, gap = self._precedent(views, idx)
            x, matched = candidate_features(
                post, views, post.lang, idx, legs, entries, self.facts, self.vocab, precedent
            )
        best = legs.dense.best[idx]
        dense = np.where(best > -1, best, legs.dense.floor)
        return Candidates(
            post, reader_lang, views, idx, x, dense, legs.dense_rank, legs.lexical_rank, matched, gap=gap
        )

    def post_vector(self, views: list[View]) -> np.ndarray:
        """The post as one vector, as precedents are compared (index/precedents.py)."""
        return self._embed([precedent_text(views)])[0]

    def _precedent(self, views: list[View], idx: np.ndarray) -> tuple[dict[str, np.ndarray] | None, float]:
        """The precedent columns and the post's lead towards a gap, when the model that ranks this
        index reads them (with fewer than MIN_POSTS precedents it does not: that costs no
        embedding)."""
        if not len(self.precedents) or not set(PRECEDENT_FEATURES) & set(self.model.rank.features):
            return None, 0.0
        v = self.post_vector(views)
        gap = self.precedents.gap(v) if "gap_precedent" in self.model.gate.features else 0.0
        entries, by_id = self.index.entries, self._by_id
        return {
            "precedent": self.precedents.column(v, idx, entries, by_id),
            "precedent_words": self.precedents.words_column(precedent_text(views), idx, entries, by_id),
        }, gap

    def _legs(self, post: Post, views: list[View]) -> Legs:
        n = len(self.index.entries)
        queries = self._embed([v.text for v in views])
        with self.phases("faiss"):
            hits = self.index.vectors.search(queries, DENSE_DEPTH)
        ev = dense_evidence(views, hits, n)
        dense_order = [int(i) for i in np.argsort(-ev.best)[:CANDIDATES] if ev.best[i] > -1]
        with self.phases("bm25"):
            tokens = tokenize(lexical_query_text(post), stem=True) + sorted(post.codes)
            bm, bm_best = self.index.lexical.scores(tokens)
        lex_order = [int(i) for i in np.argsort(-bm)[:CANDIDATES] if bm[i] > 0]
        ranks = [{e: r for r, e in enumerate(order, 1)} for order in (dense_order, lex_order)]
        return Legs(ev, bm, bm_best, tokens, *ranks)

    def _candidate_entries(self, legs: Legs) -> np.ndarray:
        """Both legs' candidates, and their translations: a pair is one FAQ, shown in the
        reader's language, so both members are weighed."""
        cand = list(dict.fromkeys([*legs.dense_rank, *legs.lexical_rank]))
        for i in list(cand):
            t = self.index.entries[i].translation
            j = self._by_id.get(t) if t else None
            if j is not None and j not in cand:
                cand.append(j)
        return np.asarray(cand, dtype=np.int64)

    # ---- ranking and the decision -------------------------------------------------------------
    def rank(
        self, c: Candidates, model: RankModel | None = None
    ) -> tuple[list[tuple[int, int | None, float]], np.ndarray]:
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
        row = gate_row(c.post, faqs, c.x, c.names, pos, self.facts, self.vocab, c.gap)
        return sections_first(faqs, entries), row

    def search(self, query: str, k: int = 5, lang: str | None = None) -> SearchResult:
        c = self.candidates(query, lang)
        return self.decide(query, c, k)

    def decide(self, query: str, c: Candidates, k: int = 5, model: RankModel | None = None) -> SearchResult:
        model = model or self.model
        sigs = c.post.errors
        faqs, gate_row = self.rank(c, model)
        if not faqs:
            return SearchResult(query, c.lang, [], [], sigs, None, c.post)
        hits = [self._hit(c, shown, other, score) for shown, other, score in faqs[:k]]
        has_content = self._has_content(c)
        if self._names_nothing(c.post) and (has_content or own_words(c.post.question, c.post.main_errors)):
            # "it does not work", "help", "报错了": whatever ranked first, it ranked first by the
            # generic words it shares with the query (index/evidence.py GENERIC_WORDS); also on a
            # small FAQ that knows none of them: the person needs to hear what to say.
            return SearchResult(query, c.lang, [], hits, sigs, 0.0, c.post, vague=True, answered=0.0)
        if not has_content:
            # Nothing in the query is a word this index knows or could translate: emoji, binary
            # junk, `" OR 1=1 --`. Whatever ranked first, it ranked first by chance.
            return SearchResult(query, c.lang, [], hits, sigs, 0.0, c.post, answered=0.0)
        rows = model.gate.select(gate_row[None, :], GATE_FEATURES)
        conf = float(model.confidence(rows, self.smallness)[0])
        answered = float(model.answered_probability(rows, self.smallness)[0])
        shape = query_shape(c.post.title, c.post.lines_total)
        if answered < model.threshold(shape) or unshared_and_far(gate_row, shape, model.unshared_dense):
            return SearchResult(query, c.lang, [], hits, sigs, conf, c.post, answered=answered)
        top = hits[0].entry
        weak = conf < model.confident or names_something_else(query, top.title, top.body)
        return SearchResult(query, c.lang, hits, [], sigs, conf, c.post, weak, answered=answered)

    def _has_content(self, c: Candidates) -> bool:
        words = informative(tokenize(" ".join(v.text for v in c.views)))
        return any(t in self.vocab or cjk_count(t) for t in words)

    @staticmethod
    def _names_nothing(post: Post) -> bool:
        """Nothing but generic words in what the person wrote and in the main error lines
        ("training fails" reads as one), and no error code or command to go on. The main lines
        only: the same answer on every gold row, p95 0.12 ms on them instead of 0.39 ms."""
        if post.codes or post.commands:
            return False
        return names_nothing(own_words(post.question, post.main_errors))

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
