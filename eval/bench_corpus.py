"""The benchmark's corpora (eval/bench.py): real FAQ files replicated with deterministic
variations, and above 100k entries the parsed entries replicated. Its queries are in
eval/bench_queries.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KB_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus"
GENERATOR_VERSION = 1

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


def replicated_entries(base: list, n_entries: int) -> list:
    """n_entries entries made from the parsed entries `base` (eval/bench_milvus.py above 100k):
    copy j >= 1 of an entry lives in doc `x<j>/<doc>` (a new id), its title says the copy and a
    platform, and every number of its title, body, signatures and commands is shifted by 7j as
    `vary_text` shifts them, so its texts and their vectors differ from the original's. Writing
    and parsing 1M entries of files instead takes ~14 min (measured: 100k written in 44 s and
    parsed in 38 s) and says nothing about the stores."""
    from dataclasses import replace

    from ingest.entry import Entry

    out = list(base[:n_entries])
    j = 1
    while len(out) < n_entries:
        for e in base[: n_entries - len(out)]:
            doc = f"x{j:02d}/{e.doc}"
            en, zh = PLATFORMS[j % len(PLATFORMS)]
            title = _shift_numbers(e.title, j)
            title = f"{title}（{zh}，副本 {j}）" if e.lang == "zh" else f"{title} ({en}, copy {j})"
            body = _shift_numbers(e.body, j)
            out.append(
                replace(
                    e,
                    id=Entry.make_id(doc, e.heading_path, title),
                    content_hash=Entry.hash_body(title, body),
                    doc=doc,
                    title=title,
                    body=body,
                    signatures=tuple(_shift_numbers(s, j) for s in e.signatures),
                    commands=tuple(_shift_numbers(c, j) for c in e.commands),
                    translation=None,
                )
            )
        j += 1
    return out
