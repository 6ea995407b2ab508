"""`kb eval`: retrieval quality on gold sets, for our search and for the baselines beside it.

A gold set is JSONL, one query per line:

    {"id": "...", "query": "...", "lang": "zh|en", "kind": "log|question|...",
     "expected": [{"doc": "a/b.md", "line": 12} | {"doc": "a/b.md", "title": "..."}]}

`expected` names the entries that answer the query (by document, relative to the KB root, and a
line inside the entry or its title); `expected: []` means nothing answers it and the right
output is no_match. An optional first line `{"meta": {"kb": "shared:corpus", "langs": ["en"]}}`
says which knowledge base the set is about ("shared:X" is X in the ../shared folder beside the
checkout, or $KB_SHARED/X) and which languages of it are indexed; `kb eval` then builds that
index once into a cache folder ($KB_EVAL_CACHE, else <tmp>/kb-eval-cache) and reuses it.

Counting a hit as correct: search shows the reader's-language version of a linked FAQ and
keeps the other one in `hit.translation`, so a hit counts when either the shown entry or its
translation matches. Rows with a `translation` item are the exception: they check that the
*shown* entry is the query's own-language one (strict) and that its linked translation is the
expected partner.

Metrics, per set and per kind / language direction (`zh->en`: a Chinese query whose answer is
an English entry): Hit@1, Hit@5, MRR@k and nDCG@k (binary gains) over answerable queries, where
a no_match answer counts as a miss; abstention (share of unanswerable queries answered
no_match); false abstention (share of answerable ones answered no_match); latency median/p95.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ingest.entry import Entry

from .config import Settings, load_settings
from .service import KbError

SYSTEMS = ("ours", "bm25", "dense", "langchain")
# The committed gold sets under eval/gold/, in the order the reports list them.
GOLD_FILES = (
    "seeds.jsonl",
    "crosslingual_zh2en.jsonl",
    "crosslingual_en2zh.jsonl",
    "crosslingual_both.jsonl",
)
SYSTEM_LABELS = {
    "ours": "ours (query views + BM25 + error signatures, fused, no-match gate)",
    "bm25": "BM25 only",
    "dense": "dense only",
    "langchain": "LangChain recipe",
}
HIT5 = 5  # Hit@5 is reported whatever --k is
# The LangChain recipe as its docs teach it; chunks are mapped back to entries by line.
LC_CHUNK_SIZE, LC_CHUNK_OVERLAP = 1000, 200


# ---- gold sets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    doc: str
    line: int | None = None
    title: str | None = None


@dataclass(frozen=True)
class GoldRow:
    id: str
    query: str
    lang: str
    kind: str
    expected: tuple[Expected, ...]
    # Own-language-first rows: the other-language entries one of which must be linked beside it.
    translation: tuple[Expected, ...] = ()
    direction: str | None = None  # e.g. "zh->en"; derived from the expected entry when absent

    @property
    def answerable(self) -> bool:
        return bool(self.expected)


@dataclass
class GoldSet:
    name: str
    path: Path
    rows: list[GoldRow]
    kb: Path | None = None  # the KB root the set is about (from its meta line)
    langs: tuple[str, ...] | None = None  # languages of that KB to index (None: all)


def shared_dir(start: Path) -> Path | None:
    """$KB_SHARED, else the `shared` folder beside the checkout (found walking up from start)."""
    env = os.environ.get("KB_SHARED")
    if env:
        return Path(env)
    for parent in [start, *start.parents]:
        if (parent / "shared").is_dir() and parent != start:
            return parent / "shared"
    return None


def _expected(item, where: str) -> Expected:
    if not isinstance(item, dict) or not isinstance(item.get("doc"), str):
        raise KbError(f"{where}: each expected item needs a 'doc' and a 'line' or 'title'")
    line, title = item.get("line"), item.get("title")
    if line is None and not title:
        raise KbError(f"{where}: expected item for {item['doc']} needs a 'line' or a 'title'")
    return Expected(item["doc"], int(line) if line is not None else None, title or None)


def load_gold(path: str | Path) -> GoldSet:
    path = Path(path)
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as e:
        raise KbError(f"cannot read gold set {path}: {e}") from e
    gold = GoldSet(name=path.stem, path=path, rows=[])
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise KbError(f"{where}: not JSON ({e})") from e
        if "meta" in obj:
            meta = obj["meta"]
            if meta.get("kb"):
                gold.kb = _resolve_kb(meta["kb"], path)
            if meta.get("langs"):
                gold.langs = tuple(meta["langs"])
            if meta.get("name"):
                gold.name = meta["name"]
            continue
        missing = [k for k in ("id", "query", "expected") if k not in obj]
        if missing:
            raise KbError(f"{where}: missing {', '.join(missing)}")
        if obj["id"] in seen:
            raise KbError(f"{where}: duplicate id {obj['id']!r}")
        seen.add(obj["id"])
        gold.rows.append(
            GoldRow(
                id=str(obj["id"]),
                query=obj["query"],
                lang=obj.get("lang") or "",
                kind=obj.get("kind") or "query",
                expected=tuple(_expected(x, where) for x in obj["expected"]),
                translation=tuple(_expected(x, where) for x in _as_list(obj.get("translation"))),
                direction=obj.get("direction"),
            )
        )
    if not gold.rows:
        raise KbError(f"gold set {path} has no queries")
    return gold


def _as_list(value) -> list:
    if not value:
        return []
    return value if isinstance(value, list) else [value]


def _resolve_kb(value: str, gold_path: Path) -> Path:
    if value.startswith("shared:"):
        shared = shared_dir(gold_path.resolve().parent)
        if shared is None:
            raise KbError(f"{gold_path}: needs the shared folder ({value}); set KB_SHARED or pass --index")
        return shared / value.removeprefix("shared:")
    p = Path(value)
    return p if p.is_absolute() else (gold_path.parent / p).resolve()


# ---- matching and metrics -------------------------------------------------------------------

_Q_PREFIX = re.compile(r"^\s*(?:Q\d*|问题)\s*[:：]\s*", re.I)
_TITLE_NOISE = re.compile(r"[`*_\s]+")


def norm_title(title: str) -> str:
    """Titles compared without markdown, spacing, case, a `Q:` prefix or end punctuation."""
    t = _TITLE_NOISE.sub("", _Q_PREFIX.sub("", title)).lower()
    return t.rstrip("?？:：。.!！")


def entry_matches(e: Entry, x: Expected) -> bool:
    if e.doc != x.doc:
        return False
    if x.line is not None and e.start_line <= x.line <= e.end_line:
        return True
    return x.title is not None and norm_title(e.title) == norm_title(x.title)


@dataclass(frozen=True)
class Shown:
    """One ranked answer as the user sees it: the entry and its linked translation."""

    entry: Entry
    translation: Entry | None = None


@dataclass
class Outcome:
    """What a system returned for one query."""

    no_match: bool
    shown: list[Shown]  # empty when no_match
    ranking: list[Shown]  # the ranking behind the decision (suggestions when no_match)
    latency_s: float = 0.0
    signals: dict | None = None  # ours only: the gate's inputs for the top entry


@dataclass
class Judged:
    row: GoldRow
    outcome: Outcome
    rank: int | None  # 1-based rank of the first correct entry among the shown ones
    ranking_rank: int | None  # the same, ignoring the no-match decision
    ndcg: float
    linked: bool | None  # own-language-first rows: the translation beside it is the expected one
    direction: str


def judge(row: GoldRow, outcome: Outcome, k: int, direction: str = "") -> Judged:
    strict = bool(row.translation)

    def first_rank(shown: list[Shown]) -> tuple[int | None, list[int]]:
        used: set[int] = set()
        gains: list[int] = []
        rank = None
        for pos, s in enumerate(shown, 1):
            cands = [s.entry] if strict else [s.entry, s.translation]
            matched = {
                j for j, x in enumerate(row.expected) for c in cands if c is not None and entry_matches(c, x)
            }
            new = matched - used
            used |= matched
            gains.append(1 if new else 0)
            if new and rank is None:
                rank = pos
        return rank, gains

    rank, gains = first_rank(outcome.shown)
    ranking_rank, _ = first_rank(outcome.ranking)
    ndcg = 0.0
    if row.expected:
        dcg = sum(g / math.log2(i + 1) for i, g in enumerate(gains[:k], 1))
        ideal = sum(1 / math.log2(i + 1) for i in range(1, min(len(row.expected), k) + 1))
        ndcg = dcg / ideal
    linked = None
    if strict and rank is not None:
        t = outcome.shown[rank - 1].translation
        linked = t is not None and any(entry_matches(t, x) for x in row.translation)
    return Judged(row, outcome, rank, ranking_rank, ndcg, linked, direction or row.direction or "")


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _p95(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)]


def metrics(judged: Sequence[Judged], k: int) -> dict:
    ans = [j for j in judged if j.row.answerable]
    una = [j for j in judged if not j.row.answerable]
    lat = [j.outcome.latency_s * 1000 for j in judged]
    linked = [j.linked for j in ans if j.linked is not None]
    strict = [j for j in ans if j.row.translation]
    return {
        "queries": len(judged),
        "answerable": len(ans),
        "unanswerable": len(una),
        "hit@1": _mean([j.rank == 1 for j in ans]),
        "hit@5": _mean([j.rank is not None and j.rank <= HIT5 for j in ans]),
        f"mrr@{k}": _mean([1 / j.rank if j.rank and j.rank <= k else 0.0 for j in ans]),
        f"ndcg@{k}": _mean([j.ndcg for j in ans]),
        "abstention": _mean([j.outcome.no_match for j in una]),
        "false_abstention": _mean([j.outcome.no_match for j in ans]),
        # The ranking alone, as if every query were answered: tells gate misses from rank misses.
        "ranking_hit@1": _mean([j.ranking_rank == 1 for j in ans]),
        "translation_linked": _mean([bool(x) for x in linked]) if strict else None,
        "latency_ms_median": round(statistics.median(lat), 1) if lat else None,
        "latency_ms_p95": round(_p95(lat), 1) if lat else None,
    }


def grouped(judged: Sequence[Judged], k: int) -> dict:
    by_kind: dict[str, list[Judged]] = {}
    by_dir: dict[str, list[Judged]] = {}
    for j in judged:
        by_kind.setdefault(j.row.kind, []).append(j)
        by_dir.setdefault(j.direction, []).append(j)
    return {
        "overall": metrics(judged, k),
        "by_kind": {name: metrics(js, k) for name, js in sorted(by_kind.items())},
        "by_direction": {name: metrics(js, k) for name, js in sorted(by_dir.items())},
    }


def misses(judged: Sequence[Judged]) -> list[dict]:
    out = []
    for j in judged:
        if j.row.answerable and j.rank == 1 and j.linked is not False:
            continue
        if not j.row.answerable and j.outcome.no_match:
            continue
        if not j.row.answerable:
            why = "answered an unanswerable query"
        elif j.outcome.no_match:
            why = "no_match" + (f" (ranked {j.ranking_rank})" if j.ranking_rank else "")
        elif j.rank is None:
            why = "not in the top k"
        elif j.rank > 1:
            why = f"ranked {j.rank}"
        else:
            why = "translation not linked"
        got = j.outcome.shown or j.outcome.ranking
        out.append(
            {
                "id": j.row.id,
                "kind": j.row.kind,
                "direction": j.direction,
                "why": why,
                "query": j.row.query[-300:],
                "expected": [asdict(x) for x in j.row.expected],
                "got": [f"{s.entry.doc}:{s.entry.start_line} {s.entry.title[:80]}" for s in got[:3]],
                "signals": j.outcome.signals,
            }
        )
    return out


# ---- indexes --------------------------------------------------------------------------------


def cache_root() -> Path:
    return Path(os.environ.get("KB_EVAL_CACHE") or Path(tempfile.gettempdir()) / "kb-eval-cache")


def _fingerprint(root: Path, embedder: str) -> str:
    """Changes when a document, the embedder's version or the code that shapes an index
    (ingest/, index/) changes."""
    import index
    import ingest
    from index.embed import embedder_id

    h = hashlib.sha1(f"{root.resolve()}|{embedder_id(embedder)}".encode())
    files = sorted(p for p in root.rglob("*") if p.is_file())
    code = sorted(Path(ingest.__file__).parent.glob("*.py")) + sorted(
        Path(index.__file__).parent.glob("*.py")
    )
    for p in [*files, *code]:
        h.update(str(p).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:20]


def cached_index(root: Path, settings: Settings, progress=None) -> Path:
    """An index of `root` in the eval cache, one folder per version of the documents and code.

    A new version starts from a copy of the newest earlier one, so only changed texts are
    embedded again; a folder is never rebuilt in place, so a test session reading it is not
    disturbed by another one building a newer version beside it. The three newest are kept.
    """
    import fcntl
    import shutil

    from .service import ingest

    if not root.exists():
        raise KbError(f"{root} does not exist: the gold set's knowledge base is missing (or pass --index)")
    base = cache_root()
    base.mkdir(parents=True, exist_ok=True)
    slug = f"{root.name}-" + hashlib.sha1(f"{root.resolve()}|{settings.embedder}".encode()).hexdigest()[:10]
    out = base / f"{slug}-{_fingerprint(root, settings.embedder)[:12]}"
    with open(base / f"{slug}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per KB; others wait and then reuse its work
        if (out / "eval.done").exists():
            return out
        earlier = sorted(base.glob(f"{slug}-*/eval.done"), key=lambda f: f.stat().st_mtime)
        if earlier and not out.exists():
            shutil.copytree(earlier[-1].parent, out, ignore=shutil.ignore_patterns(".lock", "eval.done"))
        ingest([str(root)], out, settings, progress)
        (out / "eval.done").write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
        for old in [f.parent for f in earlier][:-2]:
            shutil.rmtree(old, ignore_errors=True)
    return out


def language_subset(loaded, langs: Iterable[str]):
    """The index restricted to some languages, as if only their documents had been ingested:
    vectors reused, BM25 statistics recomputed, links to dropped entries cleared."""
    import numpy as np

    from index.lexical import Bm25
    from index.store import LoadedIndex
    from index.vectors import VectorStore
    from index.views import lexical_tokens

    langs = set(langs)
    keep = [i for i, e in enumerate(loaded.entries) if e.lang in langs]
    if len(keep) == len(loaded.entries):
        return loaded
    kept_ids = {loaded.entries[i].id for i in keep}
    entries = [
        replace(e, translation=e.translation if e.translation in kept_ids else None)
        for e in (loaded.entries[i] for i in keep)
    ]
    new_pos = {old: new for new, old in enumerate(keep)}
    gen = loaded.directory / loaded.manifest["generation"]
    vectors = np.load(gen / "vectors.npy", mmap_mode="r")
    rows = [r for r, e in enumerate(loaded.row_entry) if int(e) in new_pos]
    manifest = dict(loaded.manifest, counts={"entries": len(entries), "langs": sorted(langs)})
    return LoadedIndex(
        directory=loaded.directory,
        manifest=manifest,
        entries=entries,
        row_entry=np.asarray([new_pos[int(loaded.row_entry[r])] for r in rows], dtype=np.int64),
        row_kind=[loaded.row_kind[r] for r in rows],
        vectors=VectorStore.build(np.asarray(vectors[rows])),
        bm25=Bm25.build([lexical_tokens(e) for e in entries]),
    )


@dataclass
class Target:
    """The index a gold set runs against, with what the baselines need to rebuild it their way."""

    loaded: object  # index.store.LoadedIndex
    label: str
    sources: list[str]  # the KB roots it was built from
    langs: tuple[str, ...] | None


class Indexes:
    """Loads (and builds, once) the index each gold set needs; shares them between sets."""

    def __init__(self, settings: Settings, index_arg: str | None = None, progress=None) -> None:
        self.settings = settings
        self.index_arg = index_arg
        self.progress = progress
        self._loaded: dict[Path, object] = {}
        self._targets: dict[tuple, Target] = {}
        self._built: dict[Path, Path] = {}  # KB root -> its cached index (built once per run)

    def _load(self, directory: Path):
        from index.store import IndexError_, load

        if directory not in self._loaded:
            try:
                self._loaded[directory] = load(directory, self.settings.embedder)
            except IndexError_ as e:
                raise KbError(str(e)) from e
        return self._loaded[directory]

    def for_set(self, gold: GoldSet) -> Target:
        from .service import ensure_bundled, resolve_index

        if self.index_arg:
            directory = Path(self.index_arg)
            if not (directory / "manifest.json").exists():
                raise KbError(f"no index at {directory}; build one with `kb ingest PATH --index {directory}`")
        elif gold.kb is not None:
            if gold.kb not in self._built:
                self._built[gold.kb] = cached_index(gold.kb, self.settings, self.progress)
            directory = self._built[gold.kb]
        else:
            directory, bundled = resolve_index(self.settings, None)
            if bundled:
                ensure_bundled(directory, self.settings, self.progress)
        key = (directory, gold.langs)
        if key not in self._targets:
            loaded = self._load(directory)
            if gold.langs:
                loaded = language_subset(loaded, gold.langs)
            label = str(directory) + (f" [{'+'.join(gold.langs)}]" if gold.langs else "")
            self._targets[key] = Target(loaded, label, list(loaded.manifest.get("sources", [])), gold.langs)
        return self._targets[key]


# ---- systems --------------------------------------------------------------------------------


def _with_translations(loaded, idx: Sequence[int]) -> list[Shown]:
    by_id = loaded.by_id
    out = []
    for i in idx:
        e = loaded.entries[i]
        t = loaded.entries[by_id[e.translation]] if e.translation in by_id else None
        out.append(Shown(e, t))
    return out


class Ours:
    name = "ours"

    def __init__(self, target: Target, embedder, gate=None) -> None:
        from index.search import Searcher

        self.searcher = Searcher(target.loaded, embedder, gate)

    def run(self, query: str, k: int) -> Outcome:
        r = self.searcher.search(query, k=k)
        signals = asdict(r.signals) if r.signals is not None else None
        ranking = [Shown(h.entry, h.translation) for h in (r.hits or r.suggestions)]
        return Outcome(r.no_match, [] if r.no_match else ranking, ranking, signals=signals)


class Bm25Only:
    """BM25 over the same entry texts, with the raw query tokenized (no log reading, no fusion)."""

    name = "bm25"

    def __init__(self, target: Target) -> None:
        self.loaded = target.loaded

    def run(self, query: str, k: int) -> Outcome:
        import numpy as np

        from index.text import tokenize

        scores, _ = self.loaded.bm25.scores(tokenize(query[:20000]))
        order = [int(i) for i in np.argsort(-scores)[:k] if scores[i] > 0]
        shown = _with_translations(self.loaded, order)
        return Outcome(False, shown, shown)


class DenseOnly:
    """The same embedder and the same entry rows, the raw query embedded as it is, best row per
    entry (no query views, no lexical leg, no gate)."""

    name = "dense"

    def __init__(self, target: Target, embedder) -> None:
        self.loaded = target.loaded
        self.embedder = embedder

    def run(self, query: str, k: int) -> Outcome:
        v = self.embedder.embed([query])
        scores, rows = self.loaded.vectors.search(v, max(4 * k, 50))
        order: list[int] = []
        for r in rows[0]:
            e = int(self.loaded.row_entry[r]) if r >= 0 else -1
            if e >= 0 and e not in order:
                order.append(e)
            if len(order) >= k:
                break
        shown = _with_translations(self.loaded, order)
        return Outcome(False, shown, shown)


class LangChainRecipe:
    """What a LangChain user writes: RecursiveCharacterTextSplitter(1000, 200) over the raw
    documents, FAISS.from_documents with our default embedder behind an Embeddings adapter,
    similarity_search; each chunk is mapped back to the entries its lines overlap."""

    name = "langchain"

    def __init__(self, target: Target, embedder, progress=None) -> None:
        self.loaded = target.loaded
        self.store = _langchain_store(target, embedder, progress)
        self.by_doc: dict[str, list[int]] = {}
        for i, e in enumerate(self.loaded.entries):
            self.by_doc.setdefault(e.doc, []).append(i)

    def _entries_of(self, doc: str, start: int, end: int) -> list[int]:
        spans = []
        for i in self.by_doc.get(doc, []):
            e = self.loaded.entries[i]
            overlap = min(end, e.end_line) - max(start, e.start_line) + 1
            if overlap > 0:
                spans.append((-overlap, e.start_line, i))
        return [i for *_, i in sorted(spans)]

    def run(self, query: str, k: int) -> Outcome:
        docs = self.store.similarity_search(query, k=k)
        order: list[int] = []
        for d in docs:
            m = d.metadata
            for i in self._entries_of(m["doc"], m["start_line"], m["end_line"]):
                if i not in order:
                    order.append(i)
        shown = _with_translations(self.loaded, order[:k])
        return Outcome(False, shown, shown)


def _lc_embeddings(embedder):
    from langchain_core.embeddings import Embeddings

    class KbEmbeddings(Embeddings):
        """LangChain's Embeddings interface over our embedder (normalised vectors)."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed([text])[0].tolist()

    return KbEmbeddings()


def _langchain_store(target: Target, embedder, progress=None):
    try:
        from langchain_community.vectorstores import FAISS
        from langchain_core.documents import Document
        from langchain_text_splitters import RecursiveCharacterTextSplitter
    except ImportError as e:
        raise KbError("the LangChain baseline needs the eval extra: pip install 'bilingual-kb[eval]'") from e
    from ingest.collect import doc_language
    from ingest.read import find_files, read_text

    files, _ = find_files(target.sources)
    texts = []
    for f in files:
        try:
            text = read_text(f.path)
        except Exception:  # the ingest report already names unreadable files
            continue
        if target.langs and doc_language(f.doc, text) not in target.langs:
            continue
        texts.append((f.doc, text))
    h = hashlib.sha1(f"{embedder.id}|{LC_CHUNK_SIZE}|{LC_CHUNK_OVERLAP}".encode())
    for doc, text in texts:
        h.update(doc.encode())
        h.update(text.encode())
    folder = cache_root() / f"langchain-{h.hexdigest()[:16]}"
    embeddings = _lc_embeddings(embedder)
    if (folder / "index.faiss").exists():
        return FAISS.load_local(
            str(folder), embeddings, allow_dangerous_deserialization=True
        )  # our own cache

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=LC_CHUNK_SIZE, chunk_overlap=LC_CHUNK_OVERLAP, add_start_index=True
    )
    chunks = []
    for doc, text in texts:
        for c in splitter.split_documents([Document(page_content=text, metadata={"doc": doc})]):
            start = c.metadata["start_index"]
            first = text.count("\n", 0, start) + 1
            c.metadata.update(start_line=first, end_line=first + c.page_content.count("\n"))
            chunks.append(c)
    if progress:
        progress("chunks", 0, len(chunks))
    store = FAISS.from_documents(chunks, embeddings)
    if progress:
        progress("chunks", len(chunks), len(chunks))
    folder.parent.mkdir(parents=True, exist_ok=True)
    store.save_local(str(folder))
    return store


def make_system(name: str, target: Target, embedder, gate=None, progress=None):
    if name == "ours":
        return Ours(target, embedder, gate)
    if name == "bm25":
        return Bm25Only(target)
    if name == "dense":
        return DenseOnly(target, embedder)
    if name == "langchain":
        return LangChainRecipe(target, embedder, progress)
    raise ValueError(f"unknown system {name!r}; one of {', '.join(SYSTEMS)}")


# ---- running --------------------------------------------------------------------------------


def _direction(row: GoldRow, loaded) -> str:
    if row.direction:
        return row.direction
    if not row.expected:
        return f"{row.lang}->none"
    x = row.expected[0]
    langs = {e.lang for e in loaded.entries if entry_matches(e, x)}
    target = langs.pop() if len(langs) == 1 else "?"
    return f"{row.lang}->{target}"


def unresolved(gold: GoldSet, loaded) -> list[str]:
    """Expected items that name no entry of the index: mistakes in the gold set (or a parser
    change that moved an entry), reported instead of silently counted as misses."""
    out = []
    for row in gold.rows:
        for x in [*row.expected, *row.translation]:
            if not any(entry_matches(e, x) for e in loaded.entries):
                out.append(f"{row.id}: {x.doc} {x.line if x.line is not None else x.title!r}")
    return out


def run_set(gold: GoldSet, system, loaded, k: int, progress: Callable | None = None) -> list[Judged]:
    depth = max(k, HIT5)
    judged = []
    for n, row in enumerate(gold.rows, 1):
        t0 = time.perf_counter()
        out = system.run(row.query, depth)
        out.latency_s = time.perf_counter() - t0
        judged.append(judge(row, out, k, _direction(row, loaded)))
        if progress:
            progress(system.name, n, len(gold.rows), row.id)
    return judged


def warm_up(system) -> None:
    """Load lazily initialised parts (jieba's dictionary, the model) outside the timings."""
    for q in ("NCCL WARN Connect failed", "分布式训练报错怎么办"):
        system.run(q, 1)


@dataclass
class SetResult:
    gold: GoldSet
    target_label: str
    judged: dict[str, list[Judged]] = field(default_factory=dict)  # system -> per-query results
    unresolved: list[str] = field(default_factory=list)

    def report(self, k: int, with_misses: bool = True) -> dict:
        return {
            "set": self.gold.name,
            "path": str(self.gold.path),
            "index": self.target_label,
            "unresolved_expected": self.unresolved,
            "systems": {
                name: {**grouped(js, k), **({"misses": misses(js)} if with_misses and name == "ours" else {})}
                for name, js in self.judged.items()
            },
        }


def evaluate(
    gold_paths: Sequence[str | Path],
    index: str | None = None,
    k: int = 10,
    systems: Sequence[str] = ("ours",),
    settings: Settings | None = None,
    gate=None,
    progress: Callable | None = None,
    indexes: Indexes | None = None,
) -> list[SetResult]:
    """Run every system on every gold set; the indexes are built once and shared."""
    from index.embed import get_embedder

    settings = settings or load_settings()
    indexes = indexes or Indexes(settings, index, progress)
    embedder = get_embedder(settings.embedder)
    results = []
    for path in gold_paths:
        gold = load_gold(path)
        target = indexes.for_set(gold)
        res = SetResult(gold, target.label, unresolved=unresolved(gold, target.loaded))
        for name in systems:
            system = make_system(name, target, embedder, gate, progress)
            warm_up(system)
            res.judged[name] = run_set(gold, system, target.loaded, k, progress)
        results.append(res)
    return results


# ---- output ---------------------------------------------------------------------------------

_COLUMNS = (
    "hit@1", "hit@5", "mrr@{k}", "ndcg@{k}", "abstention", "false_abstention", "translation_linked",
    "latency_ms_median", "latency_ms_p95",
)  # fmt: skip


def _fmt(name: str, v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if name.startswith("latency") else f"{v:.3f}"


def markdown_table(rows: list[tuple[str, dict]], k: int, first: str = "") -> str:
    cols = [c.format(k=k) for c in _COLUMNS]
    if all(m.get("translation_linked") is None for _, m in rows):
        cols.remove("translation_linked")
    head = [first, "n", *cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, m in rows:
        lines.append("| " + " | ".join([label, str(m["queries"]), *(_fmt(c, m.get(c)) for c in cols)]) + " |")
    return "\n".join(lines)


def text_report(results: list[SetResult], k: int) -> str:
    out = []
    for res in results:
        out.append(f"## {res.gold.name} ({len(res.gold.rows)} queries; index {res.target_label})")
        if res.unresolved:
            out.append(
                f"warning: {len(res.unresolved)} expected items name no entry: {'; '.join(res.unresolved[:5])}"
            )
        if len(res.judged) > 1:
            rows = [(SYSTEM_LABELS[name], grouped(js, k)["overall"]) for name, js in res.judged.items()]
            out += [markdown_table(rows, k, "system"), ""]
        ours = res.judged.get("ours") or next(iter(res.judged.values()))
        g = grouped(ours, k)
        rows = [("all", g["overall"])]
        rows += [(f"kind {n}", m) for n, m in g["by_kind"].items()]
        rows += [(f"{n}", m) for n, m in g["by_direction"].items()] if len(g["by_direction"]) > 1 else []
        out += [markdown_table(rows, k, "ours"), ""]
        miss = misses(ours)
        if miss:
            out.append(f"misses ({len(miss)}):")
            for m in miss[:15]:
                got = m["got"][0] if m["got"] else "-"
                out.append(f"  {m['id']}: {m['why']}; got {got}")
            if len(miss) > 15:
                out.append(f"  ... {len(miss) - 15} more (--json lists them all)")
        out.append("")
    return "\n".join(out)


def eval_command(args) -> int:
    from .progress import ProgressBar

    systems = SYSTEMS if args.compare else ("ours",)
    results = evaluate(
        args.gold, index=args.index, k=args.k, systems=systems, progress=ProgressBar(quiet=args.json)
    )
    if args.json:
        print(json.dumps({"k": args.k, "sets": [r.report(args.k) for r in results]}, ensure_ascii=False))
    else:
        sys.stdout.write(text_report(results, args.k))
    return 0
