"""Text handling shared by indexing and querying: tokens for BM25 and log-line cleaning.

The tokenizer keeps identifiers whole *and* split (`NCCL_SOCKET_IFNAME` -> the whole name plus
`nccl`, `socket`, `ifname`), keeps numbers that are error codes (`1343225860`), and segments
Chinese with rjieba (jieba-rs, the Rust port of jieba), imported only when a text actually
contains Chinese, so English-only work never pays its start-up cost.

Why rjieba and not jieba: measured here (2 cores, shared), `import jieba` + `initialize()` took
0.75-1.7 s per process (unmarshalling its prefix dictionary), and every cold `kb search` paid it
through the no-match gate; importing rjieba (its dictionary is built in Rust) takes 0.15 s. On
every Chinese run of our text (the entries of ../shared/corpus, ../shared/seeds and the bundled
FAQ, the gold sets' queries and the real posts: 15,311 runs, 95,610 characters) rjieba's
`cut_for_search` gives exactly jieba's `lcut_for_search` tokens, in the same order, and
segments them 15x faster (0.03 s against 0.44 s). The tokenizer is part of the index format
(index/store.py FORMAT_VERSION; index/build.py keys reused term counts on TOKENIZER).

BM25 meets English words by their stems too (Snowball's English stemmer; tried at stop 79, on
main since stop 81): a post's terms and an English entry's carry each word of four letters or more
followed by its stem, so `hanging` finds an entry that says `hangs`, and a word written alike on
both sides matches on both terms. Identifiers, codes and numbers are not stemmed (only all-letter
words are), nor is a Chinese entry: its English words are log lines and names, and stemming them
put a Chinese entry that says `pip install` above the one an English `pip installing` question was
asked of (en->zh questions Hit@1 0.983 -> 0.974).
The word features (coverage, the gate's missing words) read the words as written. On the real
posts, 5 folds x 3 on the same splits, every fold's model refitted (`eval/fit.py`, stop 79's code):
Hit@1 0.641 -> 0.678, Hit@5 0.827 -> 0.842, MRR@10 0.725 -> 0.751, "no match" on unanswerable
posts 0.024 -> 0.034, answerable posts turned away 0.031 -> 0.028, matches that are right 0.785 ->
0.798, unanswerable posts shown a match 0.120 -> 0.137. Tried: every word replaced by its stem, for
BM25 and the word features, 0.656 / 0.845; stems in the word features too, 0.675 / 0.842 (Hit@1 /
Hit@5). On stop 81's code (`kb eval`, the same folds): Hit@1 0.648 -> 0.666, Hit@5 0.833 ->
0.842, unanswerable posts shown a match 0.105 -> 0.142.
The cost seen on our own words: a vague question (`training hangs at init, no error printed`)
meets an entry that says "print the log" through the stem of `printed`, both legs then put that
entry first, and the gate calls it a match. Letting the legs agree by the words as written (stems
only in the candidates and the BM25 scores) still called it a match (0.74 with the kept model)
and, refitted, lost the gain (Hit@1 0.650): the legs' agreement on stems is what helps.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ingest.lang import cjk_count

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# An identifier-ish run: letters, digits and the joiners that identifiers, paths and versions use.
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/:]*[A-Za-z0-9_]|[A-Za-z0-9]")
_SPLIT = re.compile(r"[_.\-/:]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    """a an the of to in on at for and or is are was were be been it this that with as by from if
    not no can do does how what why when which i you we my our your me should could would will
    q a: please there their has have had into than then so such use using used""".split()
)
_CJK_STOP = frozenset(
    "的 了 是 在 和 与 或 及 等 时 中 后 前 我 你 他 它 吗 呢 吧 啊 怎么 如何 什么 为什么 一个 这个 那个 请 问 ， 。 ？ ！ 、 ： ；".split()
)


TOKENIZER = "rjieba-cut_for_search+snowball-english"  # recorded with an index's term counts (index/build.py)


@lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer  # pure Python, 10 ms to import

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word) if len(word) > 3 and word.isascii() and word.isalpha() else word


def _with_stem(word: str) -> tuple[str, ...]:
    stem = _stem(word)
    return (word,) if stem == word else (word, stem)


@lru_cache(maxsize=1)
def _segment():
    import rjieba  # 0.15 s to build its dictionary: only when Chinese text shows up

    return rjieba.cut_for_search


def tokenize(text: str, stem: bool = False) -> list[str]:
    """The terms of `text`: identifiers whole and split, Chinese segmented; with `stem`, each
    English word followed by its stem (BM25's terms: index/views.py, index/search.py)."""
    tokens: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        low = word.lower()
        parts = [p for p in _SPLIT.split(word) if p]
        if len(parts) > 1 or (len(word) > 1 and _CAMEL.findall(word) != [word]):
            if low not in _STOP:
                tokens.append(low)
            for part in parts:
                for sub in _CAMEL.findall(part) or [part]:
                    s = sub.lower()
                    if s not in _STOP and (len(s) > 1 or s.isdigit()):
                        tokens.append(s)
        elif low not in _STOP and (len(low) > 1 or low.isdigit()):
            tokens.append(low)
    if stem:
        tokens = [s for t in tokens for s in _with_stem(t)]
    if cjk_count(text):
        segment = _segment()
        for run in _CJK_RUN.findall(text):
            for w in segment(run):
                if w not in _CJK_STOP:
                    tokens.append(w)
    return tokens


# Full-width letters and digits, as a Chinese input method types them (`ＥＩ０００２`), as ASCII: codes,
# BM25 and the embedder know only the ASCII ones (`HCCL报错ＥＩ０００２` was a vague question, with
# `EI0002` a match). Full-width punctuation is left as it is: it is how Chinese is written, and the
# tokenizers take it so. Neither the real posts nor the shared corpus type a full-width letter.
_FULL_WIDTH_ALNUM = {
    c: c - 0xFEE0
    for lo, hi in (("０", "９"), ("Ａ", "Ｚ"), ("ａ", "ｚ"))
    for c in range(ord(lo), ord(hi) + 1)
}
_FULL_WIDTH = re.compile("[０-９Ａ-Ｚａ-ｚ]")


def ascii_alnum(text: str) -> str:
    """`text` with full-width letters and digits as ASCII. Looked for first: translating 2 MB
    with a table takes 60 ms, finding none of them 4 ms."""
    return text.translate(_FULL_WIDTH_ALNUM) if _FULL_WIDTH.search(text) else text


# ---- logs ---------------------------------------------------------------------------------


def _word(pattern: str) -> re.Pattern[str]:
    """`pattern` as a whole word, in any case. A word's edges are ASCII letters and digits, not
    `\\b`: Python counts a Chinese character as a word character, so `\\bOOM\\b` never matched
    `微调OOM怎么办` or `OOM了`."""
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{pattern})(?![A-Za-z0-9_])", re.I)


# What people write for what the logs print (`OOM` for `out of memory`, `segfault` for
# `Segmentation fault`), spelled out beside it in the person's own words, so that the embedder and
# BM25 meet the error's words: `deepspeed zero3 OOM` found a DeepSpeed option entry before the
# `CUDA out of memory` one, and `训练时 OOM 了怎么办` an NCCL hang. Only shorthand with one meaning
# in the field; a table of the field's terms across the languages (stop 44, index/features.py)
# cost more than it found. The Chinese slang for running out of GPU memory (爆显存, 显存炸了) and
# bare `shm` get the terms of both languages, because BM25 does not cross them. A helper's review
# (stop 78) found `微调OOM怎么办`, `finetune keeps OOMing`, `EADDRINUSE on 29500` and `shm残留`
# turned away where the full term found the entry. Two real posts change (one writes OOM beside
# Chinese, one 爆显存): `kb eval`, 5 folds x 3, unanswerable posts given "no match" 0.013 -> 0.024,
# the rest as before. Two of our cross-lingual questions say `"Out of Memory" (OOM)`, left as it is.
_SHORTHAND: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (_word(r"OOM(?:s|ed|ing)?"), ("out of memory",)),
    (_word(r"seg ?faults?|segfault(?:ed|ing)"), ("Segmentation fault",)),
    (re.compile(r"段错误"), ("Segmentation fault",)),
    (re.compile(r"爆显存|显存(?:又|直接)?(?:爆|炸)(?:掉|了)?"), ("显存不足", "out of memory")),
    # 显存不足 is the Chinese for the log's words: with them, `微调时显存不足` met the fine-tuning
    # `CUDA out of memory` entry, where it got a GPU check first. Three real posts say it: `kb eval`,
    # 5 folds x 3, Hit@1 0.641 -> 0.648, Hit@5 0.827 -> 0.833, "no match" on unanswerable posts
    # 0.024 -> 0.055, answerable turned away 0.031 -> 0.019, most of it the refit's spread
    # (eval/results/fit_spread.md); the seed set's unrelated questions given "no match" 12 -> 11 of
    # 27 (a mixed-precision question asked with 显存不够 is now answered).
    (re.compile(r"显存不(?:足|够)"), ("out of memory",)),
    (_word(r"(?<![/.-])shm(?!-)"), ("shared memory", "共享内存")),  # not /dev/shm, --shm-size
    (_word(r"EADDRINUSE"), ("Address already in use",)),
    (_word(r"ECONNREFUSED|conn(?:ection)? refused"), ("Connection refused",)),
    (_word(r"perms? denied"), ("Permission denied", "PermissionError")),
    # A process that was killed (被杀了, 被kill掉; not 被杀毒软件, an antivirus): with its words,
    # `训练进程被杀了，没有报错` met the SIGKILL entry (exitcode -9); without them it was turned away.
    (re.compile(r"被(?:系统)?(?:杀(?!毒)|[Kk]ill)(?:掉|死)?了?"), ("杀掉", "Killed", "SIGKILL")),
)


# The embedder reads case: `loss 为 nan` put the NaN entry 17th by meaning, `loss 为 NaN` first;
# `the wrong nic` was turned away, `the wrong NIC` found the entry. No real post writes either.
_CANONICAL_CASE = {"nan": "NaN", "nic": "NIC", "nics": "NICs"}
_ANY_CASE = _word("|".join(_CANONICAL_CASE))


def spelled_out(text: str) -> str:
    """`text` with each piece of shorthand followed by what it stands for, in brackets, unless
    the text says one of those terms already (`"Out of Memory" (OOM)`), and the field's acronyms
    in their usual case."""
    text = _ANY_CASE.sub(lambda m: _CANONICAL_CASE[m.group(0).lower()], text)
    for shorthand, terms in _SHORTHAND:
        if not any(term.lower() in text.lower() for term in terms):
            text = shorthand.sub(rf"\g<0> ({', '.join(terms)})", text)
    return text


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TIMESTAMP = re.compile(
    r"\b\d{4}[-/]\d{2}[-/]\d{2}[ T_-]?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+"  # glog: I0720 09:29:22.035640
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d+\b"
)
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\b[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){2,7}\b", re.I)
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I)
_PATH = re.compile(r"(?<![\w.])(?:/[\w.+\-@]+){2,}/?")
# Paths under these name a resource of the system, not where a user put things: `/dev/shm` is
# what NCCL ran out of, `/etc/hosts` what maps the host names. They are kept whole.
_SYSTEM_ROOTS = ("/dev/", "/proc/", "/sys/", "/etc/")
_PID = re.compile(r"\b(?:pid|PID|tid|process)[ :=]+\d+\b|\[\s*\d+\s*\]|\(\s*pid=\d+\s*\)")
_RANK = re.compile(
    r"\b(rank|local_rank|device|device_id|gpu|card|node|worker|npu)(\s*[:=#]?\s*)(\d+)\b", re.I
)
_HOSTPREFIX = re.compile(r"^[\w.-]+:\d+:\d+\s+")  # `host:1234:5678 ` prefix of NCCL debug lines
_SPACES = re.compile(r"[ \t]+")

LOG_HINT = re.compile(
    r"Traceback \(most recent call last\)|^\s*\[?(ERROR|WARN|WARNING|INFO|CRITICAL|FATAL)\b|"
    r"^\s*[IWEF]\d{4} |\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|NCCL (WARN|INFO)|^\s*File \"",
    re.M,
)


def without_colours(line: str) -> str:
    """The line without a terminal's colour and cursor codes."""
    return _ANSI.sub("", line)


def _short_path(m: re.Match) -> str:
    """A path as its file name (the folders are this machine's), a system path whole."""
    path = m.group(0)
    return f" {path if path.startswith(_SYSTEM_ROOTS) else path.rsplit('/', 1)[-1]} "


def clean_line(line: str) -> str:
    """One log line with its run-specific noise (time, ids, addresses, paths, ranks) removed."""
    s = without_colours(line)
    s = _HOSTPREFIX.sub("", s)
    s = _TIMESTAMP.sub(" ", s)
    s = _IP.sub(" ", s)
    s = _HEX.sub(" ", s)
    s = _PATH.sub(_short_path, s)
    s = _PID.sub(" ", s)
    s = _RANK.sub(lambda m: m.group(1), s)
    return _SPACES.sub(" ", s).strip()
