"""Write the cross-lingual gold sets from ../shared/eval/crosslingual_pairs.jsonl.

Each pair is one MindSpore FAQ question in Chinese and in English, over ../shared/corpus.
Three sets come out of it (eval/gold/):

- crosslingual_zh2en.jsonl: the Chinese question, only the English documents indexed; the
  answer is the English entry.
- crosslingual_en2zh.jsonl: the reverse.
- crosslingual_both.jsonl: both languages indexed; each question must show its own-language
  entry first with the other-language entry linked as its translation (rows carry a
  `translation` item, which makes `kb eval` match the shown entry strictly).

Where one question text belongs to several pairs (a FAQ repeated on two pages), every entry it
names is listed as a right answer: the query cannot tell them apart. That holds on both sides:
the same query text, or the same question in the language searched.

Expected entries are named by the line the question sits on in its document, found by text, so
a parser change that moves entry boundaries does not break the set.

    python eval/make_crosslingual.py [--shared DIR] [--out eval/gold]
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
META = "shared:corpus"  # resolved by kb eval against $KB_SHARED or ../shared beside the checkout


def question_lines(corpus: Path, pairs: list[dict]) -> dict[tuple[str, str, str], int]:
    """(pair id, lang, doc) -> the 1-based line holding that question. A question that occurs
    twice in one document (it does) takes its occurrences in the order of the pairs."""
    found: dict[tuple[str, str, str], int] = {}
    taken: dict[tuple[str, str], int] = defaultdict(int)
    cache: dict[str, list[str]] = {}
    for p in pairs:
        for lang in ("zh", "en"):
            doc, question = p[lang]["doc"], p[lang]["question"]
            lines = cache.setdefault(doc, (corpus / doc).read_text("utf-8").split("\n"))
            hits = [i + 1 for i, line in enumerate(lines) if question in line]
            if not hits:
                raise SystemExit(f"{p['id']}: the {lang} question is not in {doc}: {question[:60]!r}")
            n = taken[(doc, question)]
            taken[(doc, question)] += 1
            found[(p["id"], lang, doc)] = hits[min(n, len(hits) - 1)]
    return found


def _row(
    p: dict, query_lang: str, lang: str, expected: list[dict], kind: str = "question", suffix: str = ""
) -> dict:
    return {
        "id": f"{p['id']}/{suffix or query_lang + '2' + lang}",
        "query": p[query_lang]["question"],
        "lang": query_lang,
        "kind": kind,
        "direction": f"{query_lang}->{lang}",
        "expected": expected,
    }


def build_sets(shared: Path) -> dict[str, list[dict]]:
    pairs = [
        json.loads(line)
        for line in (shared / "eval" / "crosslingual_pairs.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    lines = question_lines(shared / "corpus", pairs)

    # The same question text occurs in several pairs (a FAQ repeated on two pages): a query
    # cannot tell them apart, so each of those entries is a right answer. That holds for a
    # repeated query text and for a repeated answer text.
    same: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for p in pairs:
        for lang in ("zh", "en"):
            same[(lang, p[lang]["question"])].append(p)

    def items(p: dict, query_lang: str, lang: str) -> list[dict]:
        group = {q["id"]: q for q in same[(query_lang, p[query_lang]["question"])]}
        for q in list(group.values()):
            group.update({r["id"]: r for r in same[(lang, q[lang]["question"])]})
        out = []
        for q in group.values():
            doc = q[lang]["doc"]
            out.append({"doc": doc, "line": lines[(q["id"], lang, doc)]})
        return out

    zh2en = [{"meta": {"name": "crosslingual zh->en (en indexed)", "kb": META, "langs": ["en"]}}]
    en2zh = [{"meta": {"name": "crosslingual en->zh (zh indexed)", "kb": META, "langs": ["zh"]}}]
    both = [{"meta": {"name": "crosslingual own-language first (zh+en indexed)", "kb": META}}]
    for p in pairs:
        zh2en.append(_row(p, "zh", "en", items(p, "zh", "en")))
        en2zh.append(_row(p, "en", "zh", items(p, "en", "zh")))
        for own, other in (("zh", "en"), ("en", "zh")):
            row = _row(p, own, own, items(p, own, own), kind="own-language", suffix=own)
            both.append({**row, "translation": items(p, own, other)})
    return {
        "crosslingual_zh2en.jsonl": zh2en,
        "crosslingual_en2zh.jsonl": en2zh,
        "crosslingual_both.jsonl": both,
    }


def render(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def default_shared() -> Path:
    return Path(os.environ.get("KB_SHARED") or HERE.parent.parent / "shared")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--shared", type=Path, default=default_shared(), help="the shared folder (default ../shared)"
    )
    ap.add_argument("--out", type=Path, default=HERE / "gold")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in build_sets(args.shared).items():
        (args.out / name).write_text(render(rows), "utf-8")
        print(f"{args.out / name}: {len(rows) - 1} queries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
