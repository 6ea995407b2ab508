"""Posts answered before: a labelled post that reads like this one is evidence for its entry.

People paste the same trouble again and again: three posts of the real set say `Duplicate GPU
detected`, several ask for passwordless ssh between nodes in different words. The entry that
answered the earlier post is the likeliest answer to the new one, and often for reasons the
entry's own text does not show (its cause is in the other language, its title is terse). So an
index can be given precedents: posts with the entry that answers them (a team's solved tickets,
`kb feedback export --gold FILE --confirmed`, or the real posts themselves), and each candidate
gets two features, 0 when no precedent names it: `precedent`, the best cosine between this post
and a precedent it (or its translation) answered, and `precedent_words`, the best tf-idf cosine
between their words (PostWords). Two posts can print the same rare line (`Duplicate GPU
detected`, `libopen-rte.so.40`) and still read far apart as a whole: each answerable real post
taken as a nearest-neighbour query against the other posts of its knowledge base, the embedder's
cosine found the right entry for 59 of 108, the words' for 65. The ranking model weighs both
like any other evidence.

Measured with 5-fold cross-validation over 3 splits on ../shared/eval/real_dev.jsonl (eval/fit.py,
eval/results/fit.md, stop 56), each held-out post having the posts of the other folds as
precedents (about 110: what a team has after answering those), ranked by the model fitted with
precedents against the one without, on the same folds: Hit@1 0.637 -> 0.747, Hit@5 0.817 ->
0.871, MRR@10 0.725 -> 0.800, ranking Hit@1 before the gate 0.646 -> 0.762; unanswerable posts
turned away 0.024 either way, answerable ones 0.022 -> 0.043 (its gate's budget: evaluation/
gate_fit.py PRECEDENTED_POSTS_BUDGET), but unanswerable posts shown a match 0.114 -> 0.158 (an
unanswerable post can read like an answered one). `precedent_words` alone, against the model
with `precedent` only refitted the same day with the same gate budget: Hit@1 0.721 -> 0.747,
Hit@5 0.846 -> 0.858 (eval/results/fit_spread.md; 0.871 with the smaller budget). An index
without precedents is ranked as before. A popularity count instead (how many earlier posts an
entry answered, whatever they said) gave Hit@1 +0.012 (one split): what counts is that the
earlier post reads like this one.

Posts nothing answers (rows with `expected: []`: a gap someone checked) are kept as gaps. The
gate of an index with both (RankModel.with_gaps, the same ranking) reads how much closer the post
reads to the nearest gap than to the nearest answered post (`gap_precedent`, 0 when it is closer
to an answered one) and the top entry's `precedent`. Of the 31 unanswerable real posts, 18 have an
unanswerable post as their nearest other post (22% of the posts are unanswerable), and the lead
separates unanswerable posts with AUC 0.80 (the gate's: 0.635). Held out as above, the other
folds' unanswerable posts (about 25) being the gaps, against the model with precedents (fit.md
"With gaps"): Hit@1 0.747 -> 0.750, Hit@5 0.871 -> 0.880, "no match" on unanswerable posts 0.024
-> 0.179, answerable turned away 0.043 -> 0.037, unanswerable shown a match 0.158 -> 0.129,
matches right 0.850 -> 0.841. The same gate on an index given precedents and no gaps showed 0.280
of the unanswerable posts a match and turned none away (stop 40), which is why an index without
gaps keeps the gate that does not read them. A "no match" nobody checked is not a gap:
kb/unanswered.py writes it with `checked: false`, and kb/precedents.py leaves it out.

What is compared is the post as the reader keeps it (title, the person's words, the main error
lines: features.post_views), one vector per post, so a precedent costs one embedding when it is
loaded and a query one more embedding when the index has any; their words are counted once,
when the precedents are loaded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ingest.entry import Entry

from .features import View
from .text import tokenize

PRECEDENT_CHARS = 2000  # of a post's kept views, embedded as one text
# From this many precedent posts an index is ranked by the model fitted with precedents; below,
# by the model without (index/ranker.py RankModel.with_precedents). That model learns that an
# entry nobody asked about is less likely, which holds only once many have been asked: held out
# (one split of 5 folds; about 110 posts of the other folds, of which a share was kept), Hit@1
# without precedents 0.639; with 0, 11, 28, 55 and 110 posts 0.574, 0.583, 0.667, 0.704, 0.704.
MIN_POSTS = 25
# From this many gaps an index with enough precedents is ranked by RankModel.with_gaps. Held out
# (5 folds x 3), the other folds' unanswerable posts as gaps (about 25), "no match" on unanswerable
# posts 0.104 and unanswerable shown a match 0.124; with 15, 10 and 5 of them drawn at random, 0.042
# / 0.176, 0.032 / 0.186 and 0.019 / 0.238, where the model with precedents alone gives 0.077 /
# 0.186: with fewer gaps their gate turns fewer unanswerable posts away than the one without.
MIN_GAPS = 20


def precedent_text(views: Sequence[View]) -> str:
    """What of a post is compared with earlier posts: the views the reader kept, as one text."""
    return "\n".join(v.text for v in views)[:PRECEDENT_CHARS]


@dataclass(frozen=True)
class PostWords:
    """The words of earlier posts, each weighed by how rare it is among them (tf-idf, each post
    of unit length), as lists from a word to the posts that use it."""

    idf: dict[str, float]
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # word -> (post, weight in that post)
    posts: int
    unseen_idf: float  # of a word no earlier post uses

    @classmethod
    def of(cls, texts: Sequence[str]) -> PostWords:
        counts = [_word_counts(t) for t in texts]
        df = Counter(w for c in counts for w in c)
        n = len(texts)
        idf = {w: math.log((n + 1) / (d + 0.5)) for w, d in df.items()}
        lists: dict[str, tuple[list[int], list[float]]] = {}
        for k, c in enumerate(counts):
            weights = _weights(c, idf, 0.0)
            for w, v in weights.items():
                posts, values = lists.setdefault(w, ([], []))
                posts.append(k)
                values.append(v)
        postings = {
            w: (np.array(p, dtype=np.int64), np.array(v, dtype=np.float32)) for w, (p, v) in lists.items()
        }
        return cls(idf, postings, n, math.log((n + 1) / 0.5))

    def similarity(self, text: str) -> np.ndarray:
        """Per earlier post, the cosine between its weighed words and those of `text` (a word no
        earlier post uses counts in the text's length, as the rarest of all)."""
        out = np.zeros(self.posts, dtype=np.float32)
        for w, v in _weights(Counter(tokenize(text)), self.idf, self.unseen_idf).items():
            if w in self.postings:
                posts, values = self.postings[w]
                np.add.at(out, posts, values * v)
        return out


@lru_cache(maxsize=8192)
def _word_counts(text: str) -> Counter:
    """A post's words and how often each occurs; shared, so never changed by a caller. Cached
    because the cross-validation builds a PostWords per held-out post from the same other posts
    (evaluation/precedents.py): a build over 110 real posts took 79 ms, 30 ms with the cache."""
    return Counter(tokenize(text))


def _weights(counts: Counter, idf: dict[str, float], unseen: float) -> dict[str, float]:
    """Unit-length tf-idf weights: (1 + log count) x idf."""
    raw = {w: (1.0 + math.log(m)) * idf.get(w, unseen) for w, m in counts.items()}
    norm = math.sqrt(sum(v * v for v in raw.values())) or 1.0
    return {w: v / norm for w, v in raw.items()}


@dataclass(frozen=True)
class Precedents:
    """Earlier posts of one index: their vectors, and the entry that answered each; and the
    posts nothing in it answers (gaps)."""

    vectors: np.ndarray  # (n, dim) L2-normalised, as the embedder embeds queries
    entries: np.ndarray  # (n,) the answering entry's position in the index
    posts: int = 0  # how many posts (a post answered by two entries is two rows)
    gaps: np.ndarray | None = None  # (m, dim) the unanswered posts' vectors; None: none
    # The answered posts' words (their rarity counted over the gaps too), and each row's post.
    words: PostWords | None = None
    post_of_row: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def enough(self) -> bool:
        """Whether there are enough to rank by the model fitted with precedents (MIN_POSTS)."""
        return self.posts >= MIN_POSTS

    @property
    def gap_count(self) -> int:
        return 0 if self.gaps is None else len(self.gaps)

    @property
    def enough_gaps(self) -> bool:
        """Whether the index is ranked by the model that reads the gaps (MIN_GAPS)."""
        return self.enough and self.gap_count >= MIN_GAPS

    @classmethod
    def empty(cls, dim: int = 0) -> Precedents:
        return cls(np.zeros((0, dim), dtype=np.float32), np.zeros(0, dtype=np.int64))

    @classmethod
    def of(
        cls,
        vectors: Sequence[np.ndarray],
        answers: Sequence[frozenset[int]],
        gaps: Sequence[np.ndarray] = (),
        texts: Sequence[str] = (),
        gap_texts: Sequence[str] = (),
    ) -> Precedents:
        """Posts by their vectors and the entries that answer each (one row per entry), and the
        vectors of the posts nothing answers; with `texts` (the answered posts' precedent_text)
        their words too, and `gap_texts` (the others') count in how rare a word is."""
        rows = [(k, e) for k, found in enumerate(answers) for e in sorted(found)]
        gap_vectors = np.asarray(np.vstack(gaps), dtype=np.float32) if len(gaps) else None
        if not rows:
            return replace(cls.empty(), gaps=gap_vectors)
        post_of_row = np.array([k for k, _ in rows], dtype=np.int64)
        return cls(
            np.asarray(np.vstack(vectors), dtype=np.float32)[post_of_row],
            np.array([e for _, e in rows], dtype=np.int64),
            posts=len(vectors),
            gaps=gap_vectors,
            words=PostWords.of([*texts, *gap_texts]) if texts else None,
            post_of_row=post_of_row,
        )

    def gap(self, post_vector: np.ndarray | None) -> float:
        """How much closer the post reads to the nearest gap than to the nearest answered post
        (cosines); 0 when it is closer to an answered one, or there are no gaps."""
        if post_vector is None or self.gaps is None or not len(self.gaps):
            return 0.0
        v = np.asarray(post_vector, dtype=np.float32)
        answered = float((self.vectors @ v).max()) if len(self) else 0.0
        return max(0.0, float((self.gaps @ v).max()) - answered)

    def column(
        self, post_vector: np.ndarray | None, idx: np.ndarray, entries: Sequence[Entry], by_id: dict
    ) -> np.ndarray:
        """Per candidate in `idx`: the best cosine between the post and a precedent that the
        candidate or its translation answered; 0 when none did (or there are no precedents)."""
        if post_vector is None or not len(self):
            return np.zeros(len(idx), dtype=np.float32)
        sims = self.vectors @ np.asarray(post_vector, dtype=np.float32)
        return self._best_per_candidate(sims, idx, entries, by_id)

    def words_column(self, text: str, idx: np.ndarray, entries: Sequence[Entry], by_id: dict) -> np.ndarray:
        """As `column`, by the words the post shares with a precedent (PostWords) instead of
        their meaning: a rare word two posts share (`Duplicate`, `ncclInvalidUsage`) says more
        than the embedder's cosine of two long texts."""
        if self.words is None or self.post_of_row is None or not len(self):
            return np.zeros(len(idx), dtype=np.float32)
        sims = self.words.similarity(text)[self.post_of_row]
        return self._best_per_candidate(sims, idx, entries, by_id)

    def _best_per_candidate(
        self, sims: np.ndarray, idx: np.ndarray, entries: Sequence[Entry], by_id: dict
    ) -> np.ndarray:
        """Per candidate, the best of `sims` (one per row) over the rows it or its translation answered."""
        out = np.zeros(len(idx), dtype=np.float32)
        best: dict[int, float] = {}
        for e, s in zip(self.entries.tolist(), sims.tolist(), strict=True):
            best[e] = max(best.get(e, -1.0), s)
        for r, i in enumerate(int(i) for i in idx):
            t = entries[i].translation
            j = by_id.get(t) if t else None
            s = max(best.get(i, 0.0), best.get(j, 0.0) if j is not None else 0.0)
            out[r] = max(s, 0.0)
        return out
