"""The Milvus store beside the FAISS store on every gold set and the real development set:
Hit@1, Hit@5, MRR and abstention of our search, same embedder, same entries, same rows, same
ranking model; only where the candidates come from differs (FAISS + our BM25 in process, or
Milvus' dense and BM25 search). The issue's bar: Hit@1 and abstention within 0.02.

    python eval/milvus_eval.py [--uri /tmp/kb-eval-milvus.db] [--out eval/results]

Milvus Lite by default (a folder; `--uri http://host:19530` for a server). Each target index is
built as usual (FAISS, in the eval cache), then copied row for row into Milvus
(index/milvus_build.py `publish`). The committed ranking model scores both (no cross-validation:
it refits the model per fold, which says nothing about the store). Writes milvus.md and
milvus.json under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from evaluation.gold import shared_dir  # noqa: E402
from evaluation.run import GOLD_FILES, evaluate  # noqa: E402
from kb.config import load_settings  # noqa: E402

METRICS = ("hit@1", "hit@5", "mrr@10", "abstention", "false_abstention")


def _numbers(settings, golds: list[Path]) -> dict[str, dict]:
    t0 = time.perf_counter()
    results = evaluate([str(g) for g in golds], settings=settings, cross_validate=False)
    out = {}
    for r in results:
        overall = r.report(10, with_misses=False)["systems"]["ours"]["overall"]
        out[r.gold.name] = {m: overall.get(m) for m in (*METRICS, "queries", "latency_ms_median")}
    out["_seconds"] = {"total": time.perf_counter() - t0}
    return out


def _f(v) -> str:
    return "-" if v is None else f"{v:.3f}"  # abstention of a set without unanswerable rows


def _table(faiss: dict, milvus: dict) -> str:
    lines = [
        "| set | n | Hit@1 FAISS | Hit@1 Milvus | Δ | abstention FAISS | abstention Milvus | Δ | Hit@5 Δ | MRR Δ | false abst. Δ |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    worst = 0.0
    for name, f in faiss.items():
        if name.startswith("_"):
            continue
        m = milvus[name]

        def d(key: str, f=f, m=m) -> float:
            return (m[key] or 0.0) - (f[key] or 0.0)

        worst = max(worst, abs(d("hit@1")), abs(d("abstention")))
        lines.append(
            f"| {name} | {f.get('queries', '-')} | {f['hit@1']:.3f} | {m['hit@1']:.3f} | {d('hit@1'):+.3f} | "
            f"{_f(f['abstention'])} | {_f(m['abstention'])} | {d('abstention'):+.3f} | "
            f"{d('hit@5'):+.3f} | {d('mrr@10'):+.3f} | {d('false_abstention'):+.3f} |"
        )
    verdict = "within" if worst <= 0.02 else "NOT within"
    return "\n".join(lines) + f"\n\nLargest |Δ| of Hit@1 and abstention: {worst:.3f} ({verdict} 0.02).\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gold", nargs="*", help="gold sets (default: eval/gold/* and the real dev set)")
    ap.add_argument("--uri", default="/tmp/kb-eval-milvus.db")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    settings = load_settings()
    golds = [Path(g) for g in args.gold] or [
        *(HERE / "gold" / f for f in GOLD_FILES),
        (shared_dir(HERE, settings.shared) or HERE / "shared") / "eval" / "real_dev.jsonl",
    ]
    faiss = _numbers(replace(settings, store=replace(settings.store, backend="faiss")), golds)
    milvus_settings = replace(settings, store=replace(settings.store, backend="milvus", uri=args.uri))
    milvus = _numbers(milvus_settings, golds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "milvus.json").write_text(json.dumps({"faiss": faiss, "milvus": milvus}, indent=1), "utf-8")
    body = (
        "# The Milvus store beside the FAISS store\n\n"
        f"`python eval/milvus_eval.py` ({time.strftime('%Y-%m-%d')}; Milvus Lite at `{args.uri}`, "
        f"embedder `{settings.embedder}`, the committed ranking model, no cross-validation).\n"
        "Same entries and rows in both stores; only the candidate search differs.\n\n"
        + _table(faiss, milvus)
        + "\nSeconds for all sets: FAISS "
        f"{faiss['_seconds']['total']:.0f}, Milvus {milvus['_seconds']['total']:.0f} (Milvus includes "
        "copying each index into it once).\n"
    )
    (out / "milvus.md").write_text(body, "utf-8")
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
