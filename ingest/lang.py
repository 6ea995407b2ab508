"""Language guess for documents and queries: 'zh' or 'en'."""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*(```|~~~)", re.S | re.M)
_INLINE = re.compile(r"`[^`\n]*`")
# A link's target is no prose. Bounded (no bracket inside, at most 2,000 characters, possessive):
# 200,000 `](` in a row made every one of them scan the rest of the file.
_URL = re.compile(r"\]\([^()\[\]\s]{0,2000}+\)|https?://\S+")


def cjk_count(text: str) -> int:
    return len(_CJK.findall(text))


def guess_lang(text: str, default: str = "en") -> str:
    """Chinese when Chinese characters carry a fair share of the prose; `default` when the prose
    has no letters at all (only code).

    Code, inline code and link targets are ignored: a Chinese FAQ is full of English identifiers.
    One Chinese character carries about as much as three Latin letters, hence the weight.
    """
    prose = _URL.sub(" ", _INLINE.sub(" ", _FENCE.sub(" ", text)))
    cjk = cjk_count(prose)
    latin = len(_LATIN.findall(prose))
    if cjk == 0:
        return "en" if latin else default
    return "zh" if cjk * 3 >= latin * 0.5 else "en"
