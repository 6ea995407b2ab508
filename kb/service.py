"""KnowledgeBase: the one core object every door (CLI, web, Slack) calls.

Its seams are passed in (index/seams.py, kb/llm.py): `KnowledgeBase(settings, index_dir,
embedder=..., chat_model=...)`. Without them it uses what the settings name: the configured
embedder, and a LangChain chat model built from `[llm]` when one is configured.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .answer import Answer, extractive, small_talk_answer
from .config import Settings, load_settings
from .conversation import CONFIDENT_ALONE, about_the_answer, contextual_query, since_cleared, small_talk
from .errors import KbError
from .indexing import embedder_for, ensure_bundled, resolve_index, store_options
from .present import reader_language
from .query import check_query, valid_text

# A query longer than this waits its turn behind other big ones (KnowledgeBase._turn).
BIG_PASTE_CHARS = 64 * 1024


def no_index_message(index_dir: Path) -> str:
    """What to run when --index names no index; a folder of documents is what to build one from,
    and a file is neither (`kb ingest --index FILE` refuses it too)."""
    from itertools import islice

    if index_dir.is_file():
        hint = f"`kb ingest {index_dir} --index ./kb-index`, then use --index ./kb-index"
        return f"{index_dir} is a file, not an index folder; to search it, build an index of it with {hint}"

    looked_at = (
        islice(index_dir.rglob("*"), 5000) if index_dir.is_dir() else ()
    )  # `--index /` must not walk the disk
    if any(p.suffix in (".md", ".markdown", ".txt") for p in looked_at):
        return (
            f"{index_dir} holds documents, not an index; build an index of them with "
            f"`kb ingest {index_dir} --index ./kb-index`, then use --index ./kb-index"
        )
    return f"no index at {index_dir}; build one with `kb ingest PATH --index {index_dir}`"


class KnowledgeBase:
    def __init__(
        self, settings: Settings, index_dir: Path, embedder=None, chat_model=None, phases=None
    ) -> None:
        """embedder: an Embedder (index/seams.py), else the configured one; chat_model: a
        ChatModel (kb/llm.py), else one built from settings.llm when a model is configured;
        phases: the searcher's timing hook (index/timing.py), for benchmarks."""
        from index.backends import load_index
        from index.ranker import load_model

        self.settings = settings
        self.index_dir = Path(index_dir)
        self.embedder = embedder if embedder is not None else embedder_for(settings)
        self.store = store_options(settings)
        loaded = load_index(self.store, self.index_dir, self.embedder.id)
        self.model = load_model(settings.ranker or None)
        self.chat_model = chat_model
        self._phases = phases
        # The precedents' embeddings by text, kept so that a rebuilt index does not embed them again.
        self._precedent_vectors: dict = {}
        self._searcher = self._searcher_of(loaded)
        self._lock = threading.Lock()
        self._big_paste = threading.BoundedSemaphore(1)

    @classmethod
    def open(
        cls,
        index: str | None = None,
        settings: Settings | None = None,
        progress=None,
        embedder=None,
        phases=None,
    ) -> KnowledgeBase:
        from index.backends import has_index

        settings = settings or load_settings()
        index_dir, bundled = resolve_index(settings, index)
        if bundled:
            ensure_bundled(index_dir, settings, progress, embedder=embedder)
        elif not has_index(store_options(settings), index_dir):
            raise KbError(no_index_message(Path(index_dir)))
        return cls(settings, index_dir, embedder=embedder, phases=phases)

    # -- the index in use; swapped atomically when a rebuild lands -----------------------------
    @property
    def index(self):
        return self._searcher.index

    def reload_if_changed(self) -> bool:
        """Pick up a rebuilt index without downtime: requests in flight keep the old one. A
        rebuilt index that does not load raises KbError and the one in use stays."""
        from index.backends import live_generation, load_index

        generation = live_generation(self.store, self.index_dir)
        if not generation or generation == self.index.manifest.get("generation"):
            return False
        with self._lock:
            loaded = load_index(self.store, self.index_dir, self.embedder.id)
            self._searcher = self._searcher_of(loaded)
        return True

    def _searcher_of(self, loaded):
        """A searcher of the loaded index, with the precedents the settings name (kb/precedents.py)."""
        from index.search import Searcher

        from .precedents import load_precedents

        searcher = Searcher(loaded, self.embedder, self.model, self._phases)
        if self.settings.precedents:
            searcher.precedents = load_precedents(self.settings.precedents, searcher, self._precedent_vectors)
        return searcher

    def _check_query(self, query: str) -> str:
        return check_query(query, self.settings.max_query_bytes)

    @contextmanager
    def _turn(self, query: str) -> Iterator[None]:
        """Big pastes take turns, one at a time per process; short questions never wait for
        them. Measured with 4 clients sending 2 MB pastes nonstop to `kb serve`: a short
        question's p95 was 347 ms with every paste searched at once, under 200 ms with this."""
        if len(query) <= BIG_PASTE_CHARS:
            yield
            return
        with self._big_paste:
            yield

    def search(self, query: str, k: int | None = None, lang: str | None = None):
        query = self._check_query(query)
        with self._turn(query):
            return self._searcher.search(query, k=k or self.settings.top_k, lang=lang)

    def search_in_context(self, query: str, history: Sequence[tuple[str, str]] = (), lang: str | None = None):
        """A message that is sure of its own answer is answered on its own; a short follow-up
        that points back ("what if I run it in Docker?") is otherwise searched together with the
        earlier questions, and that answer is given unless it is no match. Small talk ("thanks!") and new
        questions never pull the earlier topic back. The answer follows the language of this
        message, not of the earlier turns."""
        result = self._searcher.search(query, k=self.settings.top_k, lang=lang)
        joined = contextual_query(query, history) if history else None
        if joined is None:
            return result
        if about_the_answer(query):  # "what now?" is about the answer just given, whatever else it matches
            again = self._searcher.search(joined, k=self.settings.top_k, lang=lang or result.lang)
            return result if again.no_match else again
        if (result.confidence or 0.0) >= CONFIDENT_ALONE:
            return result
        # Below that, the message points back ("it", "that") and its own few words decide
        # nothing: "what if I run it inside Docker?" alone was 0.55 sure of a Paddle launcher
        # entry, and as "the surer of the two" it beat the earlier post read with it (0.44).
        again = self._searcher.search(joined, k=self.settings.top_k, lang=lang or result.lang)
        return result if again.no_match else again

    def ask(
        self,
        query: str,
        lang: str | None = None,
        history: Sequence[tuple[str, str]] = (),
        on_token: Callable[[str], None] | None = None,
    ) -> Answer:
        """Answer a question or a pasted log.

        history: earlier turns of the conversation as (role, text), role "user" or "assistant";
        see search_in_context for how they are used.
        on_token: called with pieces of the answer text as they are produced (streaming doors).
        With an LLM configured the pieces are verified lines; if the returned Answer's text
        differs from them (a fallback after a failure midway), show the Answer instead.
        """
        query = self._check_query(query)
        history = [(role, valid_text(text)) for role, text in since_cleared(history)]  # the model's too
        talk = small_talk(query)
        if talk is not None:
            said = [text for role, text in history if role == "user"]
            # The message's own words decide; "ok" or "3q" says nothing, so the conversation does.
            neutral = said and not lang and re.fullmatch(r"\W*(ok(ay)?|k|3q)\W*", query, re.I)
            return small_talk_answer(query, talk, reader_language(said[-1] if neutral else query, lang))
        with self._turn(query):
            result = self.search_in_context(query, history, lang)
        use_llm = self.chat_model is not None or self.settings.llm_enabled
        if use_llm and not result.no_match:
            # The model reads the closest entries too, not only confident matches: on the real
            # posts about half of the answerable ones (57 of 108 in a cross-validated split) and
            # 20-23 of the 31 unanswerable ones get only a closest entry, because the gate cannot
            # tell a near miss from the answer (held-out AUC 0.57). Asked only about confident
            # matches, even a perfect reader could turn away at most 4 of those 31. The model cites
            # the entry that answers (its commands are checked against it) or says none applies
            # ("no match"); an answer citing nothing falls back to the closest-entry answer. With
            # no match at all there is nothing to read: the model is never asked to invent one.
            from .llm import llm_answer

            return llm_answer(
                result, self.settings.llm, history=history, on_token=on_token, model=self.chat_model
            )
        answer = extractive(result)
        if on_token is not None:
            on_token(answer.text)
        return answer

    def entry(self, entry_id: str):
        i = self.index.by_id.get(entry_id)
        return self.index.entries[i] if i is not None else None

    def stats(self) -> dict:
        m = self.index.manifest
        return {
            # Milvus: the index's name, never the server's address (stats are public on `kb serve`).
            "index": f"milvus:{self.store.name}" if self.store.milvus else str(self.index_dir),
            "entries": m["counts"]["entries"],
            "languages": {"zh": m["counts"]["zh"], "en": m["counts"]["en"]},
            "linked_translations": m["counts"]["linked"],
            "embedder": m["embedder"],
            "built_at": m["built_at"],
            "generation": m["generation"],
            "sources": m.get("sources", []),
            "skipped": m.get("problems", []),  # files the last build left out, and why
            "warnings": m.get("warnings", []),  # files indexed with a caveat
            # Which ranking model answers (KB_RANKER / `ranker` switches it): its file's name only.
            "ranker": {
                "model": Path(self.settings.ranker).name if self.settings.ranker else "default",
                "fitted_at": self.model.meta.get("fitted_at"),
                "embedder": self.model.meta.get("embedder"),
                # posts the index was given as precedents and as gaps (kb/precedents.py), and
                # whether they are enough for the models fitted with them
                "precedents": self._searcher.precedents.posts,
                "gaps": self._searcher.precedents.gap_count,
                "with_precedents": self._searcher.model is not self.model,
                "with_gaps": "gap_precedent" in self._searcher.model.gate.features,
            },
        }
