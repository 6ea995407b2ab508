"""KnowledgeBase: the one core object every door (CLI, web, Slack) calls."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .answer import Answer, extractive
from .config import Settings, default_home, load_settings


class KbError(Exception):
    """A problem the user can fix; the message says how. Doors print it without a traceback."""


class QueryError(KbError):
    pass


def bundled_docs() -> Path:
    return Path(str(resources.files("kb") / "data" / "faq"))


def _fingerprint(folder: Path) -> str:
    h = hashlib.sha1()
    for p in sorted(folder.rglob("*.md")):
        h.update(p.relative_to(folder).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class IngestOutcome:
    entries: int
    files: int
    problems: list[str]  # files skipped, "doc: reason"
    embedded: int
    reused: int
    seconds: float
    seconds_embed: float
    index: str
    warnings: list[str] = field(default_factory=list)  # files indexed with a caveat, "doc: reason"


def ingest(
    paths: list[str],
    index_dir: Path,
    settings: Settings | None = None,
    progress: Callable[[str, int, int, str], None] | None = None,
    follow_links_outside: bool = False,
) -> IngestOutcome:
    """Parse the documents under `paths` and (re)build the index at `index_dir`. Links leaving
    the given folders are skipped (and reported) unless `follow_links_outside`."""
    from index.embed import get_embedder
    from index.store import build
    from ingest.collect import collect
    from ingest.link import link_translations, read_declared_pairs

    settings = settings or load_settings()
    report = collect(
        paths,
        progress=(lambda d, n, doc: progress("parse", d, n, doc)) if progress else None,
        follow_links_outside=follow_links_outside,
    )
    skipped = [str(p) for p in report.problems if p.skipped]
    warnings = [str(p) for p in report.problems if not p.skipped]
    if not report.entries:
        problems = "; ".join(skipped[:5])
        raise KbError(
            f"no FAQ entries found in {', '.join(map(str, paths))}" + (f" ({problems})" if problems else "")
        )
    embedder = get_embedder(settings.embedder)
    pairs = read_declared_pairs(Path(p) for p in paths)

    def link(entries, title_vectors):
        return link_translations(
            entries, pairs, similarity=lambda a, b: title_vectors(a) @ title_vectors(b).T
        )

    stats = build(
        index_dir,
        report.entries,
        embedder,
        sources=[str(Path(p).resolve()) for p in paths],
        problems=skipped,
        warnings=warnings,
        progress=(lambda stage, d, n: progress(stage, d, n, "")) if progress else None,
        link=link,
    )
    return IngestOutcome(
        entries=stats.entries,
        files=report.files,
        problems=skipped,
        warnings=warnings,
        embedded=stats.embedded,
        reused=stats.reused,
        seconds=stats.seconds_total,
        seconds_embed=stats.seconds_embed,
        index=str(index_dir),
    )


def resolve_index(settings: Settings, index: str | None = None) -> tuple[Path, bool]:
    """--index, else KB_INDEX / kb.toml (already merged into settings), else the bundled KB."""
    if index:
        return Path(index), False
    if settings.index:
        return Path(settings.index), False
    slug = settings.embedder.replace("/", "_").replace(":", "_")
    return default_home() / f"bundled-{slug}", True


def ensure_bundled(index_dir: Path, settings: Settings, progress=None) -> None:
    """Build the bundled knowledge base's index on first use, and again when its docs change."""
    docs = bundled_docs()
    stamp = index_dir / "bundled.fingerprint"
    fp = _fingerprint(docs)
    if (index_dir / "manifest.json").exists() and stamp.exists() and stamp.read_text().strip() == fp:
        return
    ingest([str(docs)], index_dir, settings, progress)
    stamp.write_text(fp)


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """Lone surrogates (undecodable bytes in argv, "\\ud800" in a JSON body) cannot be encoded as
    UTF-8 and crash the tokenizer deep inside a search: they become U+FFFD, as bad stdin bytes do."""
    return _SURROGATE.sub("\ufffd", text)


def check_query(query: str, max_bytes: int) -> str:
    """Refuse what no search can use, with a message that says what to do; NUL bytes become spaces."""
    if not isinstance(query, str):
        raise QueryError("the query must be text")
    size = len(query.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise QueryError(
            f"the query is {size} bytes; the limit is {max_bytes} (KB_MAX_QUERY_BYTES). "
            "Paste the part of the log around the error."
        )
    query = valid_text(query).replace("\x00", " ")
    if not query.strip():
        raise QueryError("the query is empty: paste an error message or ask a question")
    return query


BIG_PASTE_CHARS = (
    64 * 1024
)  # a query longer than this waits its turn behind other big ones (KnowledgeBase._turn)
# A follow-up longer than this is a new question, never read together with earlier turns.
FOLLOW_UP_MAX_CHARS = 200
FOLLOW_UP_MAX_WORDS = 5  # a follow-up leans on the context: "what if I use RoCE?" has one word of its own
# A message that only acknowledges or thanks carries no question: it never pulls the earlier
# topic back (the web chat used to answer "thanks!" with the first answer again).
_SMALL_TALK = re.compile(
    r"^\W*(thanks?|thank you( so much| very much)?|thx|ty|ok(ay)?|great|cool|nice|got it|perfect|awesome|"
    r"solved|it works|谢谢(你|您)?|多谢|感谢|好的|好|明白了?|收到|了解了?|解决了|可以了)[\W\s]*$",
    re.I,
)


# A follow-up leans on what came before: it points back ("it", "that", "same") or continues
# ("what if", "what about", "and", "also", "如果", "那", "还是"). A short question without such a
# word is a new topic ("How do I set up passwordless SSH?"), answered on its own.
_REFERS_BACK = re.compile(
    r"\b(it|its|this|that|these|those|same|also|too|again|still|instead|then|there|what if|what about|"
    r"how about|and|or|but)\b|如果|假如|那|还是|还|这个|那个|同样|也|呢|换成|改成",
    re.I,
)
CONFIDENT_ALONE = 0.8  # a message this sure of its own answer is not read with the earlier turns


def contextual_query(query: str, history: Sequence[tuple[str, str]]) -> str | None:
    """The message read together with the conversation's earlier questions, for a short
    follow-up ("what if I use RoCE?"); None when history cannot help it."""
    from index.text import tokenize

    earlier = [text for role, text in history if role == "user" and text.strip()]
    if not earlier or len(query) > FOLLOW_UP_MAX_CHARS or _SMALL_TALK.match(query):
        return None
    if len(set(tokenize(query))) > FOLLOW_UP_MAX_WORDS or not _REFERS_BACK.search(query):
        return None  # a question with this much of its own, or that points nowhere back, is a new topic
    # The earlier question first, the follow-up last: the post reader reads both.
    return "\n".join([*(t[-4000:] for t in earlier[-2:]), query])


class KnowledgeBase:
    def __init__(self, settings: Settings, index_dir: Path) -> None:
        from index.embed import get_embedder
        from index.ranker import ModelError, load_model
        from index.search import Searcher
        from index.store import IndexError_, load

        self.settings = settings
        self.index_dir = Path(index_dir)
        try:
            loaded = load(self.index_dir, settings.embedder)
            self.model = load_model(settings.ranker or None)
        except (IndexError_, ModelError) as e:
            raise KbError(str(e)) from e
        self.embedder = get_embedder(settings.embedder)
        self._searcher = Searcher(loaded, self.embedder, self.model)
        self._lock = threading.Lock()
        self._big_paste = threading.BoundedSemaphore(1)

    @classmethod
    def open(cls, index: str | None = None, settings: Settings | None = None, progress=None) -> KnowledgeBase:
        settings = settings or load_settings()
        index_dir, bundled = resolve_index(settings, index)
        if bundled:
            ensure_bundled(index_dir, settings, progress)
        elif not (index_dir / "manifest.json").exists():
            raise KbError(f"no index at {index_dir}; build one with `kb ingest PATH --index {index_dir}`")
        return cls(settings, index_dir)

    # -- the index in use; swapped atomically when a rebuild lands -----------------------------
    @property
    def index(self):
        return self._searcher.index

    def reload_if_changed(self) -> bool:
        """Pick up a rebuilt index without downtime: requests in flight keep the old one. A
        rebuilt index that does not load raises KbError and the one in use stays."""
        from index.search import Searcher
        from index.store import IndexError_, load, read_manifest

        try:
            manifest = read_manifest(self.index_dir)
            if not manifest or manifest.get("generation") == self.index.manifest.get("generation"):
                return False
            with self._lock:
                loaded = load(self.index_dir, self.settings.embedder)
                self._searcher = Searcher(loaded, self.embedder, self.model)
        except IndexError_ as e:
            raise KbError(str(e)) from e
        return True

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
        that points back ("what if I run it in Docker?") is also searched together with the
        earlier questions, and the surer of the two answers wins. Small talk ("thanks!") and new
        questions never pull the earlier topic back. The answer follows the language of this
        message, not of the earlier turns."""
        result = self._searcher.search(query, k=self.settings.top_k, lang=lang)
        joined = contextual_query(query, history) if history else None
        if joined is None or (result.confidence or 0.0) >= CONFIDENT_ALONE:
            return result
        again = self._searcher.search(joined, k=self.settings.top_k, lang=lang or result.lang)
        if again.no_match or (again.confidence or 0.0) <= (result.confidence or 0.0):
            return result
        return again

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
        history = [(role, valid_text(text)) for role, text in history]
        with self._turn(query):
            result = self.search_in_context(query, history, lang)
        if self.settings.llm_enabled and not result.no_match and not result.weak:
            # With no match (or only a weak one) there is nothing to summarise: the model is never
            # asked to invent one.
            from .llm import llm_answer

            return llm_answer(result, self.settings.llm, history=history, on_token=on_token)
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
            "index": str(self.index_dir),
            "entries": m["counts"]["entries"],
            "languages": {"zh": m["counts"]["zh"], "en": m["counts"]["en"]},
            "linked_translations": m["counts"]["linked"],
            "embedder": m["embedder"],
            "built_at": m["built_at"],
            "generation": m["generation"],
            "sources": m.get("sources", []),
        }
