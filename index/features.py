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
- the ranks in each leg, and whether the entry is in the reader's language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ingest.entry import Entry

from .post import Post
from .text import clean_line, tokenize

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
    if not errors and not views:
        errors = list(post.boilerplate[:1])
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
    if not post.errors and not post.prose and not post.title:
        parts += list(post.boilerplate)
    return "\n".join(p for p in parts if p)[:8000]


@dataclass
class DenseEvidence:
    """Per candidate entry: the best cosine per (view kind, row kind), and over everything."""

    best: np.ndarray  # (n_entries,) best cosine over all views and rows; -1 when not seen
    by_view: dict[str, np.ndarray]  # view kind -> (n_entries,)
    by_row: dict[str, np.ndarray]  # row kind -> (n_entries,)
    per_view: np.ndarray  # (n_views, n_entries) best cosine of each view, -1 when not seen
    floor: float  # the lowest cosine seen: what an entry outside every view's neighbours gets


def dense_evidence(
    views: list[View], scores: np.ndarray, rows: np.ndarray, row_entry: np.ndarray, row_kind: list[str], n: int
) -> DenseEvidence:
    per_view = np.full((len(views), n), -1.0, dtype=np.float32)
    by_row = {k: np.full(n, -1.0, dtype=np.float32) for k in ROW_KINDS}
    for v, (s_row, r_row) in enumerate(zip(scores, rows, strict=True)):
        valid = r_row >= 0
        ents = row_entry[r_row[valid]]
        vals = s_row[valid].astype(np.float32)
        np.maximum.at(per_view[v], ents, vals)
        for kind in ROW_KINDS:
            mask = np.fromiter((row_kind[r] == kind for r in r_row[valid]), dtype=bool, count=len(ents))
            if mask.any():
                np.maximum.at(by_row[kind], ents[mask], vals[mask])
    best = per_view.max(axis=0) if len(views) else np.full(n, -1.0, dtype=np.float32)
    seen = best[best > -1]
    floor = float(seen.min()) if len(seen) else 0.0
    by_view = {}
    for kind in VIEW_KINDS:
        idx = [i for i, v in enumerate(views) if v.kind == kind]
        by_view[kind] = np.where(per_view[idx] > -1, per_view[idx], floor).max(axis=0) if idx else np.zeros(n, dtype=np.float32)
    return DenseEvidence(best, by_view, by_row, per_view, floor)


def coverage(want: set[str], have: frozenset[str] | set[str], idf) -> float:
    """Share of `want` (weighted by rarity) that `have` contains."""
    total = sum(idf(t) for t in want)
    return sum(idf(t) for t in want & have) / total if total > 0 else 0.0


def informative(tokens) -> set[str]:
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
