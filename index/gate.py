"""What the no-match gate sees of a ranking: one row of GATE_FEATURES for the top answer.

The gate (index/ranker.py) turns this row into the probability that the top answer is right.
Besides the ranking's own view (the top score, its lead, the softmax mass it holds) and the top
entry's evidence (its FEATURES row), it looks at what the post is about that the top entry does
not cover: the coverage of the post's main line and of its error lines by the entry's words, and
the rarest word the index knows that the entry lacks. An unrelated post usually shares common
words with its nearest entry (`cuda`, `memory`) but not its main line's rare ones.

Tried and not kept (stop 50; branch gate-telling): the main line's words and the error lines'
without index/evidence.py GENERIC_WORDS, so that an entry saying `报错` to a post saying `错误`
is not read as missing the post's rarest word. Refitted (eval/fit.py, 5x3, main's two draws):
Hit@1 0.644 and 0.652, Hit@5 0.827 and 0.830 (unchanged); "no match" on unanswerable posts
0.036 and 0.051 (0.036, 0.036); answerable turned away 0.028 and 0.043 (0.025, 0.037). Within the
spread, and `多机训练报 NCCL 错误怎么办` on the seeds stayed "no match" (answered 0.50 -> 0.53,
threshold 0.65): the ranking's words (BM25, coverage) also take `错误` and `报错` as different words.

Screened and not fitted (stop 82): how specific the evidence the top entry shares with the post
is, for a vague post that meets an entry through common words only (`no error printed` meets
the HCCL entry that says to print its logs). Six columns: the rarity of the rarest word of the
main line, and of the whole post, that the entry shares; of the three rarest shared; how many
shared words are rarer than 0.6 of the rarest the index knows; the rarity of the main line's and
of the error lines' three rarest words. On the 170 searches of the real posts, ranked by the shipped model, a logistic
regression over the gate's columns cross-validated by post (5 folds x 5): AUC for "the index
answers it" 0.729 -> 0.736 at best (the shared rarest word of the whole post), 0.733 with all
six; for "the top answer is right" 0.754 -> 0.761. Alone each reached 0.47-0.61, under the top
probability's 0.78: what they tell, the ranking's lead already says.
"""

from __future__ import annotations

import numpy as np

from .evidence import Vocabulary, informative
from .facts import EntryFacts
from .post import Post
from .ranker import GATE_FEATURES, softmax_by_group
from .text import tokenize

NO_RUNNER_UP_MARGIN = 5.0  # the lead of a top answer that has no runner-up

# Every way the top entry (or its translation) can share words with the query.
WORD_EVIDENCE = (
    "main_coverage",
    "query_coverage",
    "title_coverage",
    "bm25_abs",
    "signature_overlap",
    "code_match",
)


def shares_no_word(row: np.ndarray) -> bool:
    """Nothing but the embedding ties the top entry to the query: a gate row (GATE_FEATURES)
    with no word evidence. A right answer of this kind is a question asked in another language,
    and close in meaning: in the committed fit the least cosine of one was 0.52 (30 short
    queries, median 0.76), while `../../../../etc/passwd` reached 0.26 and still got a gate
    probability above the short threshold, the gate being linear and such queries unlike any it
    was fitted on (RankModel.unshared_dense is the floor, evaluation/gate_fit.py fits it)."""
    return all(row[GATE_FEATURES.index(f)] == 0.0 for f in WORD_EVIDENCE)


def unshared_and_far(row: np.ndarray, shape: str, floor: float) -> bool:
    """A short query that shares no word with its top entry, which is further from it in
    meaning than `floor` (RankModel.unshared_dense): no match, whatever the gate says."""
    return shape == "short" and shares_no_word(row) and row[GATE_FEATURES.index("dense_max")] < floor


def main_line(post: Post) -> str:
    """The line that says what the post is about: its title, else its most telling error
    line, else what the person wrote."""
    return post.title or (post.errors[0] if post.errors else post.question)


def gate_row(
    post: Post,
    faqs: list[tuple[int, int | None, float]],
    x: np.ndarray,
    names: tuple[str, ...],
    position: dict[int, int],
    facts: EntryFacts,
    vocab: Vocabulary,
    gap: float = 0.0,
) -> np.ndarray:
    """faqs: the ranking, best first, as (shown entry, its translation, score); x: the
    candidates' features (rows by `position` of an entry index); gap: the post's lead towards
    a post nothing answers (index/precedents.py Precedents.gap)."""
    top = [m for m in faqs[0][:2] if m is not None]
    top_x = x[[position[m] for m in top if m in position]].max(axis=0)
    scores = np.array([f[2] for f in faqs])
    have = frozenset().union(*(facts[m].tokens for m in top))
    main = informative(tokenize(main_line(post)))
    known = {t for t in main if t in vocab}
    missing = [vocab.idf(t) for t in known - have]
    error_lines = [informative(tokenize(line)) for line in (*post.exceptions[:1], *post.errors[:2])]
    row = {
        "top_score": faqs[0][2],
        "margin": faqs[0][2] - faqs[1][2] if len(faqs) > 1 else NO_RUNNER_UP_MARGIN,
        "top_prob": softmax_by_group(scores, np.zeros(len(scores), dtype=np.int64))[0],
        "has_title": 1.0 if post.title else 0.0,
        "has_prose": 1.0 if post.prose else 0.0,
        "has_errors": 1.0 if post.errors else 0.0,
        "error_coverage": max((vocab.coverage(w, have) for w in error_lines if w), default=1.0),
        "main_coverage": vocab.coverage(main, have) if main else 0.0,
        "known_rare_missing": max(missing, default=0.0) / vocab.idf_max,
        "known_missing_share": len(known - have) / len(known) if known else 0.0,
        "unknown_share": 1.0 - len(known) / len(main) if main else 0.0,
        "gap_precedent": gap,
    }
    col = {f: k for k, f in enumerate(names)}
    return np.array([row[f] if f in row else top_x[col[f]] for f in GATE_FEATURES], dtype=np.float64)
