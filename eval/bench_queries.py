"""The benchmarks' queries: short questions, 60-line issue posts and 200-line training logs.

Short questions are error strings and tools named in the corpus and the bundled KB; the posts and
logs are our own templates wrapped around real error signatures of ../shared/corpus (a
deterministic pick), so every query has an answer in the benchmark corpus.
"""

from __future__ import annotations

import functools
import random

from bench_corpus import CORPUS

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
