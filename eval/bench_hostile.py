"""The most expensive queries the size limit allows, timed (issue 17, item 3).

    python eval/bench_hostile.py [--index DIR] [--runs 3]

Each shape is searched `runs` times in one warm process (the bundled index unless --index) and
the median and worst are reported, with the process's RSS before and after. Before the
per-request bounds (index/post.py: MAX_LINES, MAX_LINE_CHARS; views of at most 500 characters;
bounded query caches) these took 2.3-7.5 s each. Writes eval/results/hostile_queries.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LIMIT = 2 * 1024 * 1024


def shapes() -> dict[str, str]:
    rnd = random.Random(0)
    body = LIMIT - 1024
    words = ["".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(3, 9))) for _ in range(5000)]
    return {
        "2 MB one-line Chinese": ("训练报错内存不足" * (body // 24))[: body // 3],
        '2 MB of prose with "error"': ("error: " + " ".join(rnd.choices(words, k=body // 7)))[:body],
        "ANSI-escape flood": ("\x1b[31mERROR\x1b[0m failed " * (body // 30))[:body],
        "700k identical lines": "x\n" * 700_000,
        "2 MB unique error line": "RuntimeError: " + "".join(rnd.choices("abcdefghij klmnop", k=body - 20)),
        "40k distinct error lines": "\n".join(
            f"RuntimeError: failure {i} in module m{i}" for i in range(40_000)
        )[:body],
    }


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "hostile_queries.md"))
    args = ap.parse_args(argv)
    from kb.service import KnowledgeBase

    kb = KnowledgeBase.open(index=args.index)
    kb.search("NCCL error(2) unhandled system error")
    kb.search("多机训练 NCCL 超时怎么办")
    rows = []
    rss_before = rss_mb()
    for name, query in shapes().items():
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            kb.search(query)
            times.append(time.perf_counter() - t0)
        rows.append((name, len(query.encode()) / 1e6, statistics.median(times), max(times)))
        print(
            f"{name:28s} {rows[-1][1]:.2f} MB  median {rows[-1][2] * 1000:.0f} ms  max {rows[-1][3] * 1000:.0f} ms"
        )
    rss_after = rss_mb()
    lines = [
        "# Hostile queries",
        "",
        f"`python eval/bench_hostile.py --runs {args.runs}` on {time.strftime('%Y-%m-%d')}, index "
        f"{kb.index_dir.name} ({len(kb.index.entries)} entries), one warm process on a shared 2-core machine. "
        "Limit: every query the size limit allows answers in 1 s or less.",
        "",
        "| query shape | size | median | worst |",
        "|---|---|---|---|",
        *(
            f"| {n} | {mb:.2f} MB | {med * 1000:.0f} ms | {worst * 1000:.0f} ms |"
            for n, mb, med, worst in rows
        ),
        "",
        f"Process RSS {rss_before:.0f} MiB before, {rss_after:.0f} MiB after.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", "utf-8")
    worst = max(r[3] for r in rows)
    print(f"worst {worst * 1000:.0f} ms; wrote {args.out}")
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
