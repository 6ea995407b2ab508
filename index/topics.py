"""What a post and an entry are about, in coarse families: which product, which kind of trouble.

Two words can carry a whole post: `paddle` in a `pip list`, `torch_npu` in a traceback's path.
Neither embedding nor BM25 weighs them as such. The embedder sees the few views the post reader
keeps, not the environment dump that names the framework; BM25 sees `paddle` as one word among
forty. So a Paddle wheel's "is not a supported wheel on this platform" went to the MindSpore FAQ,
which asks that question twice, before the Paddle FAQ (tests/test_search_products.py). Here each side gets a profile over a few hand-named families, and the features compare them:

- products: the framework or stack a text is about. Of a post, counted over everything it shows
  (environment dumps and paths included: they are where the product is named); of an entry,
  over its whole document (path, headings, titles, bodies), because an entry's own text often
  never names its product ("How do I set the port range?" in a Paddle FAQ);
- symptoms: the kind of trouble (a hang, slowness, memory, installing, the network, devices,
  communication, gradients). Of a post, counted over its title, prose and main error lines; of
  an entry, over its title (and headings) and over its title and body.

Measured with 5-fold cross-validation repeated 3 times on ../shared/eval/real_dev.jsonl
(eval/fit.py's folds, the gate's budget unchanged), as ranking features: Hit@1 0.499 -> 0.551, Hit@5 0.740 -> 0.803, MRR@10
0.609 -> 0.660; better in 11 of 15 folds, worse in 2 (fold spread of the gain ±0.066). Products
alone gave +0.013 Hit@1 (most of their gain is in Hit@5), symptoms alone +0.028. An entry-level
product profile, instead of the document's, gave nothing. A learned topic in place of the word
lists (cosine of the post's views to each document's mean vector) gave nothing either
(-0.003..+0.006). Nor did a third profile, the setup's scale (one device, several in one machine,
several machines: 单机单卡 / 单机多卡 / 多机多卡, `--nnodes=2`), of the post's words and launch
commands against the entry's title and headings, meant to tell a FAQ's single-machine question
from its multi-machine twin (stop 38): Hit@1 0.644 -> 0.644, Hit@5 0.830 -> 0.836, MRR@10 0.729
-> 0.726, and the refitted gate turned away 0.046 of the answerable posts (0.025).

Ascend's chip names (`910B`, `910C`, `310P`) in the "ascend" family, so that "910B 训练 hang 住了"
reads as an Ascend post (stop 73), cost on every count: Hit@1 0.650 -> 0.644, Hit@5 0.827 ->
0.818, "no match" on unanswerable posts 0.045 -> 0.024, answerable turned away 0.028 -> 0.040
(`kb eval`, 5 folds x 3). No corpus or seeds page names a chip; two real posts and two of our
gold questions do, and refitting on those four changed rows moved the trees that much (within a
refit's spread, eval/results/fit_spread.md, but nothing gained); not kept.

The families were written from what the field is, not from the evaluation posts: a first
symptom list that borrowed phrases of evaluation titles scored half as much again, which is
the leak such lists invite.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

PRODUCTS = {
    "paddle": r"paddle|飞桨|\bfleet\b|\bfluid\b",
    "mindspore": r"mindspore|mindformers|mindinsight|mindrecord|昇思",
    "ascend": r"torch_npu|torch-npu|ascend|昇腾|\bnpu\b|\bcann\b|\bhccl|\batlas\b|aclnn|\bacl\b|\be[a-z]\d{4}\b",
    "swift": r"ms-swift|\bswift\b|modelscope",
    "deepspeed": r"deepspeed|\bzero[-_ ]?[123]\b",
    "accelerate": r"\baccelerate\b|accelerator\.",
    "megatron": r"megatron",
    "horovod": r"horovod",
    "mpi": r"mpirun|openmpi|\bucx\b|\bmpi\b",
    "nvidia": r"\bnccl|\bcuda\b|nvidia|\bgpu|cudnn|nvcc",
    "torch": r"\btorch\b|pytorch|torchrun|torch\.distributed|\bddp\b",
}
# Products that name one stack; the others (MPI, CUDA, torch) sit under many of them.
SPECIFIC = ("paddle", "mindspore", "ascend", "swift", "deepspeed", "accelerate", "megatron", "horovod")
SYMPTOMS = {
    "hang": r"\bhang|\bhung\b|stuck|freez|timed? ?out|timeout|卡住|超时",
    "slow": r"\bslow|speed|performance|速度|慢|性能",
    "memory": r"memory|\boom\b|显存|内存",
    "install": r"install|\bpip\b|conda|compil|\bbuild\b|import|安装|编译",
    "network": r"\bssh\b|permission|socket|\bport\b|connect|network|网络|端口|连接",
    "device": r"\bdevice\b|\bgpu id\b|设备",
    "comm": r"nccl|hccl|communicat|collective|allreduce|通信",
    "grad": r"gradient|backward|梯度|反向",
}
PRODUCT_CHARS = 200_000  # of a post or an entry, counted for products
SYMPTOM_CHARS = 50_000
FEATURES = (
    "product_match",
    "product_conflict",
    "product_generic",
    "product_cosine",
    "symptom_match",
    "symptom_title_match",
    "symptom_cosine",
    "symptom_title_conflict",
)
STRONG, PRESENT = 0.5, 0.3  # profile levels: a family the text is mostly about, one it is about


class Families:
    """Counts of each family's mentions in a text: one pass of one expression over the text in
    lower case (patterns are written in lower case: a case-insensitive pass took half as long
    again, 0.60 against 0.39 ms for an entry of the corpus, and a build counts every entry)."""

    def __init__(self, families: dict[str, str]) -> None:
        self.names = tuple(families)
        self._rx = re.compile("|".join(f"(?P<{n}>{p})" for n, p in families.items()))

    def names_one(self, token: str) -> bool:
        """Whether a whole token is made of mentions of the families (`mindspore`, `飞桨`, `nccl`,
        `paddlepaddle`)."""
        token = token.lower()
        return bool(token) and sum(len(m.group(0)) for m in self._rx.finditer(token)) == len(token)

    def count(self, text: str, limit: int) -> list[int]:
        out = dict.fromkeys(self.names, 0)
        for m in self._rx.finditer(text[:limit].lower()):
            out[m.lastgroup or ""] += 1
        return [out[n] for n in self.names]


PRODUCT_FAMILIES = Families(PRODUCTS)
SYMPTOM_FAMILIES = Families(SYMPTOMS)
_SPECIFIC = np.array([n in SPECIFIC for n in PRODUCT_FAMILIES.names])


def profile(counts: Sequence[float]) -> np.ndarray:
    """How much a text is about each family, 0..1, the most mentioned family at 1 (log-damped:
    forty mentions in a dump are not forty times one in a title)."""
    v = np.log1p(np.asarray(counts, dtype=np.float64))
    top = v.max() if len(v) else 0.0
    return v / top if top > 0 else v


def product_counts(text: str) -> list[int]:
    return PRODUCT_FAMILIES.count(text, PRODUCT_CHARS)


def symptom_counts(text: str) -> list[int]:
    return SYMPTOM_FAMILIES.count(text, SYMPTOM_CHARS)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


def product_columns(post: np.ndarray, doc: np.ndarray) -> list[float]:
    """post, doc: product profiles. The strongest specific product both are about; whether each
    is clearly about a specific product but never the same one; the same for the shared stacks
    (MPI, CUDA, torch); and the profiles' cosine."""
    ps, ds = post * _SPECIFIC, doc * _SPECIFIC
    match = float(np.max(np.minimum(ps, ds))) if ps.any() else 0.0
    apart = ps.max() > STRONG and ds.max() > STRONG and not np.any((ps > PRESENT) & (ds > PRESENT))
    generic = float(np.max(np.minimum(post * ~_SPECIFIC, doc * ~_SPECIFIC)))
    return [match, 1.0 if apart else 0.0, generic, _cosine(post, doc)]


def symptom_columns(post: np.ndarray, title: np.ndarray, body: np.ndarray) -> list[float]:
    """post: the symptom profile of what the person and the errors say; title, body: of the
    entry's title and of its title and body. The strongest shared symptom (with the body, with
    the title), the cosine with the body, and whether the title names only other symptoms."""
    apart = post.max() > 0 and title.max() > 0 and not np.any((post > PRESENT) & (title > PRESENT))
    return [
        float(np.max(np.minimum(post, body))),
        float(np.max(np.minimum(post, title))),
        _cosine(post, body),
        1.0 if apart else 0.0,
    ]
