"""The benchmark's corpora and queries (eval/bench.py): real FAQ files replicated with
deterministic variations, short questions, and 200-line training logs that end in a real error.
"""

from __future__ import annotations

import functools
import json
import os
import random
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


# A 60-line issue post (our own template): what people paste into the chat more often than a
# whole log. The question is in the first lines, the error at the end, noise in between.
_POST_HEAD = (
    "[Bug] two-node job stops at init, rank {r} on node {a}",
    "",
    "### Describe the problem",
    "Training works on one machine with {w} cards; with two machines it stops during start-up.",
    "What setting is missing? I tried twice, the second time after a reboot.",
    "",
    "### Environment",
)
_POST_ENV = (
    "- OS: Ubuntu 22.04, kernel 5.15.0-{n1}",
    "- Python 3.10.{e}, driver 535.{n1}, CUDA 12.{e}",
    "- torch 2.{e}.{r}, deepspeed 0.14.{r}, accelerate 0.{n1}.0",
    "| GPU {r}  A100-SXM4-80GB   On | 00000000:{a:02X}:00.0 Off |   {n1}MiB / 81920MiB |",
    "numpy                    1.26.{e}",
    "transformers             4.{n1}.0",
    "  master_port: {p}",
    "  gradient_accumulation_steps: {e}",
    "  mixed_precision: bf16",
)


def make_post(i: int, run: int, error_lines: list[str]) -> str:
    """A 60-line post: title, question, environment and config dump, traceback, error_lines last."""
    rng = random.Random(f"post-{i}-{run}")

    def fields() -> dict:
        return {
            "r": rng.randint(0, 7),
            "w": 8,
            "a": rng.randint(1, 254),
            "n1": rng.randint(20, 900),
            "e": rng.randint(0, 9),
            "p": rng.randint(20000, 40000),
        }

    lines = [t.format(**fields()) for t in _POST_HEAD]
    tail = ["", "### Error", "```", "Traceback (most recent call last):"]
    tail += [
        f'  File "/home/user/run{run}/train.py", line {rng.randint(20, 900)}, in main',
        "    trainer.train()",
    ]
    tail += error_lines + ["```"]
    while len(lines) < 60 - len(tail):
        lines.append(_POST_ENV[len(lines) % len(_POST_ENV)].format(**fields()))
    return "\n".join(lines + tail)


QUERY_KINDS = ("short", "post", "log")


def timed_queries(run: int) -> list[tuple[str, str]]:
    """(kind, text) of every timed query: short questions, 60-line posts, 200-line logs."""
    errors = log_error_lines()
    batch = [("short", q) for q in SHORT_QUERIES]
    batch += [("post", make_post(i, run, lines)) for i, lines in enumerate(errors)]
    return batch + [("log", make_log(i, run, lines)) for i, lines in enumerate(errors)]


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
