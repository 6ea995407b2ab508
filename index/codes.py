"""Error identity: error codes kept together with what names them.

`NCCL error(2)` and `NCCL error(5)` are different problems with different fixes, but a bag of
words sees `nccl`, `error` and a digit that tokenizers drop. Crash-grouping systems key on the
fingerprint first; so do we. Each code becomes one token that carries its namespace:

    NCCL error(2) / NCCL Error 2: / Nccl error(2)   -> nccl_error_2
    Cuda error(30) / cuda runtime error (10)         -> cuda_error_30 / cuda_error_10
    ret = 1343225860 / ret[107001]                   -> ret_1343225860 / ret_107001
    EI0006 / EJ0001 / EE9999 / E39999                 -> ei0006 / ej0001 / ee9999 / e39999
    ERR99999 / ERR02200                              -> err99999 / err02200
    error code is 507035 / Error Number: 2           -> code_507035 / code_2
    [Errno 98] / errno: 98                           -> errno_98
    exitcode: -9 / exit code 137 / exit status 255   -> exit_-9 / exit_137 / exit_255

The tokens go into BM25 on both sides (so an exact code is a rare, heavy term) and into two
ranking features: a shared code, and a conflicting one (same name, other number), which is how
the error(5) entry stops winning an error(2) post.

Tried and not kept (stop 53; branch nccl-result-names): NCCL's own names of its results as codes,
`ncclSystemError` and ncclGetErrorString's `unhandled system error` -> nccl_error_2 (PyTorch prints
the message, never the number). Three splits of 5 folds against main: Hit@5 0.818 -> 0.836, better
in every split, but Hit@1 0.639 -> 0.630 (one split -0.065): the FAQ's two entries printing that
message tie, and a log naming another result than its cause conflicts with its answer
(eval/results/fit_spread.md). Over six splits (stop 54): Hit@1 0.634 -> 0.625, Hit@5 0.821 -> 0.829,
and one of the three new splits lost Hit@5 too.

Tried and not kept (stop 73): a shared code counting in full only where the entry is about it (its
title or its error lines) and half where its prose only mentions it, as `error code is 7` stands
in the text of the entry on where HCCL writes its logs. `kb eval`, 5 folds x 3: Hit@1 0.650 ->
0.638, Hit@5 0.827 -> 0.821, "no match" on unanswerable posts 0.045 -> 0.013, answerable turned
away 0.028 -> 0.021.
"""

from __future__ import annotations

import functools
import re

# Word boundaries and digits of ASCII only: Chinese characters are word characters to Python, so
# `\b` found no edge in `HCCL报错EI0002` (typed without a space, as Chinese is) and the code was
# lost. No real post and no corpus page changed its codes with this.
_NAMED = re.compile(
    r"\b([A-Za-z][A-Za-z]{1,15})(?:\s+runtime)?\s+error\s*(?:\(\s*(-?\d{1,6})\s*\)|[:=]?\s+(-?\d{1,6})\b(?=\s*[:,)]|\s*$))",
    re.I | re.A,
)
_UNNAMED = re.compile(r"\berror\s*[=(]\s*(-?\d{1,6})\b", re.I | re.A)
_ASCEND = re.compile(r"\b(E[A-Z]\d{4}|E\d{5}|ERR\d{5})\b", re.A)
_RET = re.compile(r"\bret(?:\s*[=:]\s*|\s*\[\s*)(-?\d{1,12})\b", re.I | re.A)
_CODE = re.compile(
    r"\b(?:error[ _]code|error number|err(?:or)?_?code|errcode)\s*(?:is|:|=)?\s*(-?\d{1,12})\b", re.I | re.A
)
_ERRNO = re.compile(r"\berrno\s*[:=]?\s*(-?\d{1,4})\b|\[Errno\s*(-?\d{1,4})\]", re.I | re.A)
_EXIT = re.compile(r"\bexit(?:[ _]?code|[ _]status)\s*[:=]?\s*\(?(-?\d{1,4})\b", re.I | re.A)
# Words before "error" that are not the name of a library or layer.
_NOT_A_NAME = frozenset("an the this that runtime system unknown internal unhandled an some with".split())

MAX_CHARS = 200_000  # a code is in the first part of a huge paste or in its error lines


def error_codes(text: str) -> frozenset[str]:
    """The error-identity tokens of a text (see the module docstring)."""
    text = text[:MAX_CHARS]
    found: set[str] = set()
    for m in _NAMED.finditer(text):
        name = m.group(1).lower()
        num = m.group(2) or m.group(3)
        if name not in _NOT_A_NAME:
            found.add(f"{name}_error_{num}")
    for m in _UNNAMED.finditer(text):
        found.add(f"error_{m.group(1)}")
    for m in _ASCEND.finditer(text):
        found.add(m.group(1).lower())
    for m in _RET.finditer(text):
        if m.group(1) not in ("0", "-1"):
            found.add(f"ret_{m.group(1)}")
    for m in _CODE.finditer(text):
        found.add(f"code_{m.group(1)}")
    for m in _ERRNO.finditer(text):
        found.add(f"errno_{m.group(1) or m.group(2)}")
    for m in _EXIT.finditer(text):
        if m.group(1) != "0":
            found.add(f"exit_{m.group(1)}")
    return frozenset(found)


@functools.lru_cache(maxsize=512)
def entry_codes(title: str, body: str) -> frozenset[str]:
    """The codes of an entry. A build asks twice per entry, for its BM25 terms (index/views.py)
    and then for its facts (index/facts.py), a document's entries at a time. Measured on 583
    benchmark-corpus entries (loaded machine): the regexes take 1.5 ms an entry, and the stage
    went from 6.6 to 4.8 ms an entry once they ran once."""
    return error_codes(title + "\n" + body)


def code_name(code: str) -> str | None:
    """The namespace of a numbered code (`nccl_error_2` -> `nccl_error`), None for codes that are
    names themselves (`ei0006`)."""
    head, sep, num = code.rpartition("_")
    return head if sep and num.lstrip("-").isdigit() else None


def conflicts(query: frozenset[str], entry: frozenset[str]) -> bool:
    """The entry is about another number of a code the query names (error(5) vs error(2)) and
    does not also cover the query's number."""
    if not query or not entry or query & entry:
        return False
    names = {code_name(c) for c in query} - {None}
    return any(code_name(c) in names for c in entry)


# NCCL's results by the names PyTorch and Paddle print (ncclGetErrorString) and by their enum
# names: `unhandled cuda error` is ncclUnhandledCudaError, 1; `unhandled system error` is 2.
_NCCL_RESULT_NAMES = {
    "unhandledcudaerror": 1, "unhandled cuda error": 1,
    "systemerror": 2, "unhandled system error": 2,
    "internalerror": 3, "internal error": 3,
    "invalidargument": 4, "invalid argument": 4,
    "invalidusage": 5, "invalid usage": 5,
    "remoteerror": 6, "remote error": 6,
}  # fmt: skip
_NCCL_RESULT = re.compile(
    r"\bnccl(UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b|"
    r"\b(unhandled cuda error|unhandled system error|internal error|invalid argument|invalid usage|remote error)\b|"
    r"\bnccl\s*error\s*(?:\(\s*|:?\s*)([1-7])\b",
    re.I | re.A,
)


def nccl_results(text: str) -> frozenset[int]:
    """The NCCL results a text names, on its lines that say NCCL: `NCCL error(2)`,
    `ncclSystemError`, `..., unhandled cuda error, NCCL version 2.14.3` (PyTorch prints the name,
    never the number). Not a ranking feature (see the module docstring: as codes they cost
    Hit@1); `Searcher.decide` reads them so that an entry about another result is never shown as
    a match with its commands."""
    found: set[int] = set()
    for line in text[:MAX_CHARS].split("\n"):
        if "nccl" not in line.lower():
            continue
        for m in _NCCL_RESULT.finditer(line):
            name = (m.group(1) or m.group(2) or "").lower()
            found.add(_NCCL_RESULT_NAMES[name] if name else int(m.group(3)))
    return frozenset(found)


# A shared library a line says could not be loaded: `ImportError: libcudart.so.11.0: cannot open
# shared object file`, `error while loading shared libraries: libopen-rte.so.40`, `Failed to open
# libibverbs.so[.1]`. The name without its version.
_LIBRARY = re.compile(r"\b(lib[\w+-]+?)\.so\b", re.A)
_NOT_LOADED = re.compile(
    r"cannot open shared object|loading shared librar|failed to (?:open|load)|dlopen|dlerror|"
    r"undefined symbol|no such file|not found|找不到|无法加载|加载.{0,6}失败",
    re.I,
)


def libraries_not_loaded(text: str) -> frozenset[str]:
    """The shared libraries a text's lines say could not be loaded, in lower case."""
    found: set[str] = set()
    for line in text[:MAX_CHARS].split("\n"):
        if ".so" in line and _NOT_LOADED.search(line):
            found.update(name.lower() for name in _LIBRARY.findall(line))
    return frozenset(found)


# What a post names that an entry must name too to be shown as its match: the NCCL results and
# the libraries that could not be loaded.
_MUST_SHARE = (nccl_results, libraries_not_loaded)


@functools.lru_cache(maxsize=512)
def _entry_names(title: str, body: str) -> tuple[frozenset, ...]:
    text = title + "\n" + body
    return tuple(read(text) for read in _MUST_SHARE)


def names_something_else(query: str, title: str, body: str) -> bool:
    """The post names NCCL results, or libraries that could not be loaded, and the entry only
    others: the closest entry at best, never a match with its commands.
    - `unhandled cuda error` against an `unhandled system error` entry: on the real posts this
      changed no answer's strength (the two such top answers were already the closest entry);
      the bundled index matched the cuda error with 0.97.
    - `libcudart.so.11.0: cannot open shared object file` against the torch_npu `libhccl.so`
      entry, whose other words the line reproduces: a match at 0.99 with `source set_env.sh`.
    The entry's side is read first (once per entry): most entries name neither, and then the
    post, however long, is not read."""
    for read, covered in zip(_MUST_SHARE, _entry_names(title, body), strict=True):
        if covered:
            asked = read(query)
            if asked and not (asked & covered):
                return True
    return False
