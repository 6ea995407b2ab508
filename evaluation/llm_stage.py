"""`kb eval --llm`: what the configured language model makes of retrieval's answers, measured.

With a model configured, `kb ask` and the doors let it read the entries of every answered post
(a match or a closest entry) and either cite the one that answers or say that none applies
(kb/llm.py, kb/service.py). How often it turns away a post nobody can answer, and how often it
wrongly turns away one that has an answer, depends on the model, so it cannot be measured here
(no model runs offline) and is measured with the user's own: every answered row of a gold set
goes to the model as `kb ask` would send it, and what comes back is judged like any system:

- the verdict "no source applies" is "no match";
- an answer puts the entries it cites first, in citation order (the first is what the reader is
  told applies), then the rest of retrieval's ranking;
- an answer that cites nothing, or a failed call, keeps retrieval's outcome, as `kb ask` falls
  back to the extractive answer.

The committed model's decisions are the ones read (what a user's `kb ask` does), so the system
to compare it with is `ours` in the same report, not the cross-validated numbers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from kb.config import Settings
from kb.errors import LlmError

from .crossval import Example
from .metrics import Outcome, Shown

SYSTEM = "ours + LLM"


def _reordered(ranking: list[Shown], answer) -> list[Shown]:
    """Retrieval's ranking with the cited entries first (a cited source is the hit itself or, for
    a reader of the other language, its translation)."""
    cited_ids = [c.entry.id for c in answer.citations]

    def cites(s: Shown, entry_id: str) -> bool:
        return s.entry.id == entry_id or (s.translation is not None and s.translation.id == entry_id)

    first = [s for cid in cited_ids for s in ranking if cites(s, cid)]
    first = [s for n, s in enumerate(first) if s not in first[:n]]
    return first + [s for s in ranking if s not in first]


def read_by_model(
    examples: Sequence[Example],
    decisions: Sequence[tuple],
    settings: Settings,
    progress: Callable | None = None,
    model=None,
) -> tuple[dict[str, list[Outcome]], dict]:
    """Outcomes per row id after the model read each answered example, and what the model did.
    `decisions`: per example, retrieval's (SearchResult, Outcome) (crossval.decided); `model`: a
    chat model to use instead of the one settings.llm names."""
    from kb.llm import chat_model, llm_answer

    if model is None:
        if not settings.llm_enabled:
            raise LlmError(
                "`kb eval --llm` needs a language model: set KB_LLM_MODEL (and KB_LLM_BASE_URL for a "
                "local server), as for `kb ask`; see the README's 'Answers from a language model'"
            )
        model = chat_model(settings.llm)
    by_row: dict[str, list[Outcome]] = {}
    counts = {"asked": 0, "no_source_applies": 0, "cited": 0, "fell_back": 0, "changed_first": 0}
    seconds: list[float] = []
    for n, (ex, (result, out)) in enumerate(zip(examples, decisions, strict=True), 1):
        if not result.no_match:
            counts["asked"] += 1
            t0 = time.perf_counter()
            answer = llm_answer(result, settings.llm, model=model)
            seconds.append(time.perf_counter() - t0)
            if answer.no_match:
                counts["no_source_applies"] += 1
                out = Outcome(True, [], out.ranking, out.latency_s, result.confidence)
            elif answer.mode == "llm" and answer.citations:
                counts["cited"] += 1
                first = _reordered(out.ranking, answer)
                counts["changed_first"] += first[0] != out.ranking[0]
                out = Outcome(False, first, first, out.latency_s, result.confidence)
            else:
                counts["fell_back"] += 1
        by_row.setdefault(ex.row.id, []).append(out)
        if progress:
            progress("language model", n, len(examples), ex.row.id)
    stats = {
        **counts,
        "model": settings.llm.model if settings.llm_enabled else type(model).__name__,
        "seconds_median": round(statistics.median(seconds), 2) if seconds else None,
    }
    return by_row, stats
