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

# File names and paths: 数据.json, /home/用户/x, ~/实验/run, C:\数据\y (asker_lang leaves them out).
_PATHISH = re.compile(r"(?<![\w/\\])(?:[A-Za-z]:)?[~.]*[/\\][\w.\\/-]*|[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b")


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


def asker_lang(own_words: str, text: str) -> str:
    """The language of a question or a pasted post. The person's words (`own_words`: its title and
    sentences) decide: Chinese prose around an English log is a Chinese question.

    Two Chinese characters are enough. People who ask in Chinese write the field's terms and
    error text in English inside their sentences (`paddle 多机 Nccl error(2)`, `用 accelerate launch
    多机时 NCCL timeout`), so weighing their Chinese against those letters (guess_lang, meant for
    documents) answered them in English; people who ask in English do not type Chinese. With no
    sentence of the person's own (`报错如下：` above a log reads as a label), Chinese anywhere in
    the paste is theirs or their system's: English tools print none. File names and paths do not
    count (`when I load 数据.json` is English). Of the 139 real posts this changed two, both with
    a Chinese title (`deepspeed 安装报错`, `训练报错 [ERROR] ...`)."""
    if cjk_count(_PATHISH.sub(" ", own_words)) >= 2:
        return "zh"
    if own_words.strip():
        return "en"
    head = text[:20000]
    return "zh" if cjk_count(_PATHISH.sub(" ", head)) >= 2 else guess_lang(head)
