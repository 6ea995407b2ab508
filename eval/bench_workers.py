"""What eval/bench.py measures inside its child processes: ingest, warm search (timed through
the searcher's timing hook, index/timing.py), the LangChain recipe, and a cold start.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import time
from pathlib import Path

from bench_queries import QUERY_KINDS, SHORT_QUERIES, log_error_lines, make_log, timed_queries

from evaluation.stats import percentile


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
    """`kb ingest`'s code path (kb.indexing.ingest), timing its stages: parsing from its progress
    calls, loading the model apart, the rest from the build's own stage timings."""
    t0 = time.perf_counter()
    from index.store import load
    from kb.config import load_settings
    from kb.indexing import embedder_for, ingest

    settings = load_settings()
    marks: dict[str, float] = {}

    def progress(stage: str, done: int, total: int, detail: str = "") -> None:
        if stage == "parse":
            marks["parsed"] = time.perf_counter()

    t_start = time.perf_counter()
    embedder = embedder_for(settings)
    t_model = time.perf_counter()
    outcome = ingest([corpus], Path(index), settings, progress=progress, embedder=embedder)
    t_end = time.perf_counter()
    parsed = marks.get("parsed", t_model)
    stages = {
        "imports": t_start - t0,
        "model": t_model - t_start,
        "parse": parsed - t_model,
        **outcome.stages,
    }
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


def _summary(samples: list[dict]) -> dict:
    totals = [s["total"] for s in samples]
    parts = sorted({p for s in samples for p in s} - {"total"})
    return {
        "n": len(samples),
        "median_ms": 1000 * statistics.median(totals),
        "p95_ms": 1000 * percentile(totals, 0.95),
        "breakdown_median_ms": {p: 1000 * statistics.median(s.get(p, 0.0) for s in samples) for p in parts},
    }


def _timed_searches(kb, stopwatch, runs: int) -> dict[str, list[dict]]:
    """Every query of the set, `runs` times, each with an empty query-vector cache."""
    from index.search import forget_query_vectors

    samples: dict[str, list[dict]] = {kind: [] for kind in QUERY_KINDS}
    for run in range(runs):
        for kind, q in timed_queries(run + 1):
            forget_query_vectors()
            stopwatch.reset()
            t = time.perf_counter()
            kb.search(q)
            total = time.perf_counter() - t
            parts = dict(stopwatch.seconds)
            parts["fusion"] = max(0.0, total - sum(parts.values()))  # fusion, grouping, the gate
            parts["total"] = total
            samples[kind].append(parts)
    return samples


def worker_search(index: str, runs: int, recall: bool) -> dict:
    """Warm searches timed through the searcher's timing hook (index/timing.py)."""
    t0 = time.perf_counter()
    from index.timing import Stopwatch
    from kb.service import KnowledgeBase

    stopwatch = Stopwatch()
    kb = KnowledgeBase.open(index=index, phases=stopwatch)
    t_open = time.perf_counter() - t0
    rss_open = _rss_mb()
    logs = [make_log(i, 0, lines) for i, lines in enumerate(log_error_lines())]
    for _, q in timed_queries(0):  # warm-up: lazy imports, jieba, per-index caches
        kb.search(q)
    load_before = os.getloadavg()[0]
    samples = _timed_searches(kb, stopwatch, runs)
    repeated = []  # a repeated paste: the query-vector cache answers
    for q in SHORT_QUERIES:
        t = time.perf_counter()
        kb.search(q)
        repeated.append(time.perf_counter() - t)
    out = {
        "open_seconds": t_open,
        "rss_after_open_mb": rss_open.get("vmrss_mb"),
        **{kind: _summary(samples[kind]) for kind in QUERY_KINDS},
        "repeated_short_ms": 1000 * statistics.median(repeated),
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
    """recall@10 of the approximate index against exact search: of the (entry, kind) rows the
    vector index returns for each query vector, and of the entries the whole search returns."""
    from index.features import post_views
    from index.post import read_post
    from index.store import exact_vectors

    loaded = kb.index
    approx, exact = loaded.vectors, exact_vectors(loaded)
    queries = list(SHORT_QUERIES) + logs
    row_hits = row_total = entry_hits = entry_total = 0
    for q in queries:
        qv = kb.embedder.embed_queries([v.text for v in post_views(read_post(q))])
        a, e = approx.search(qv, 10), exact.search(qv, 10)
        for ae, ak, ee, ek in zip(a.entries, a.kinds, e.entries, e.kinds, strict=True):
            want = set(zip(ee.tolist(), ek.tolist(), strict=True))
            row_hits += len(set(zip(ae.tolist(), ak.tolist(), strict=True)) & want)
            row_total += len(want)
        loaded.vectors = approx
        got = _hit_ids(kb.search(q, k=10))
        loaded.vectors = exact
        want_ids = _hit_ids(kb.search(q, k=10))
        loaded.vectors = approx
        entry_hits += len(set(got) & set(want_ids))
        entry_total += len(want_ids)
    return {
        "rows_at_10": row_hits / max(1, row_total),
        "entries_at_10": entry_hits / max(1, entry_total),
        "queries": len(queries),
    }


def _hit_ids(result) -> list[str]:
    return [h.entry.id for h in (result.hits or result.suggestions)]


def _lc_embeddings():
    from evaluation import langchain_recipe as recipe
    from kb.config import load_settings
    from kb.indexing import embedder_for

    return recipe.embeddings(embedder_for(load_settings()))


def worker_lc_build(corpus: str, folder: str) -> dict:
    t0 = time.perf_counter()
    from evaluation import langchain_recipe as recipe
    from ingest.read import find_files, read_text

    t_imports = time.perf_counter()
    embeddings = _lc_embeddings()
    t_model = time.perf_counter()
    files, _ = find_files([corpus])
    texts = [(f.doc, read_text(f.path)) for f in files]
    t_read = time.perf_counter()
    chunks = recipe.chunks(texts)
    t_split = time.perf_counter()
    store = recipe.build(chunks, embeddings)
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


def _lc_samples(store, runs: int) -> dict[str, list[dict]]:
    samples: dict[str, list[dict]] = {kind: [] for kind in QUERY_KINDS}
    for run in range(runs):
        for kind, q in timed_queries(run + 1):
            t = time.perf_counter()
            store.similarity_search(q, k=5)
            samples[kind].append({"total": time.perf_counter() - t})
    return samples


def worker_lc_search(folder: str, runs: int) -> dict:
    t0 = time.perf_counter()
    from evaluation import langchain_recipe as recipe

    store = recipe.load(folder, _lc_embeddings())
    t_open = time.perf_counter() - t0
    for _, q in timed_queries(0):
        store.similarity_search(q, k=5)
    as_shipped = _lc_samples(store, runs)  # FAISS with its default OpenMP threads (one per core)
    import faiss

    faiss.omp_set_num_threads(1)  # the setting our own search uses, to separate the two effects
    one_thread = _lc_samples(store, runs)
    return {
        "open_seconds": t_open,
        **{kind: _summary(as_shipped[kind]) for kind in QUERY_KINDS},
        "one_thread": {kind: _summary(one_thread[kind]) for kind in QUERY_KINDS},
        "vectors": int(store.index.ntotal),
        **_rss_mb(),
    }


def worker_cold() -> dict:
    """The phases of a cold `kb search` on the bundled KB, inside one fresh process."""
    t0 = time.perf_counter()
    from kb.service import KnowledgeBase

    t1 = time.perf_counter()
    from kb.config import load_settings
    from kb.indexing import embedder_for

    embedder_for(load_settings())
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
