"""What a heading or an opening paragraph says: its text without markup, and whether it is a
question or part of a problem report. The parser (ingest/parse.py) decides where entries are;
this module reads their titles.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

MAX_DOC_TITLE = 120  # title of a whole-document entry taken from its first line
_BLOCK_MARKER = re.compile(r"^\s*(?:(?:[-+*]|\d{1,9}[.)]|>|#{1,6})\s+)+")
_INLINE_MD = MarkdownIt("commonmark")
_MAX_INLINE_SRC = 2000  # never inline-parse more than this for a title
_SPACE_RE = re.compile(r"\s+")
_LEFTOVER_BOLD_RE = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_MARKUP_CHARS = re.compile(r"[*_`<>\[\]!\\&~]")
# "Q:", "Q3:", "Q3.", "问题：", "问：", "Question 2:" at the start of a title.
_QUESTION_RE = re.compile(
    r"^(?:Q\d*\s*[:：]|Q\d+[.、．](?!\d)|问(?:题)?\s*\d*\s*[:：]|Question\s*\d*\s*[:：])\s*", re.I
)
# Sub-headings that are parts of one problem report (matched against the whole heading text,
# numbering and a trailing colon removed).
_REPORT_PROBLEM_RE = re.compile(
    r"^(?:问题|问题描述|问题现象|问题现象描述|现象|现象描述|故障现象|报错信息|错误信息|错误关键信息|关键信息|"
    r"问题复现|复现|"
    r"复现步骤|计算环境|环境|环境信息|运行环境|软件环境|硬件环境|背景|"
    r"symptoms?|problem|problem description|issue|description|environment|reproduction|"
    r"steps to reproduce|(?:key )?error messages?|error logs?|background)$",
    re.I,
)
_REPORT_SOLUTION_RE = re.compile(
    r"^(?:原因|原因分析|可能原因|问题原因|问题分析|根因|根因分析|解决|解决方法|解决方案|解决措施|解决办法|解决思路|"
    r"处理方法|处理方案|处理措施|处理步骤|方案|方法|修复方法|规避方案|"
    r"causes?|possible causes?|root causes?|cause analysis|analysis|solutions?|fix|workaround|resolution)$",
    re.I,
)
_NUMBERING_RE = re.compile(r"^[\s\d.．、)）(（]+")
TAG_RE = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)
# Inside a bold question paragraph the colon is sometimes left out: "**Q 为何...**".
QUESTION_LOOSE_RE = re.compile(r"^Q\d*\s+(?=\S)")


def inline_text(src: str) -> str:
    """Plain text of inline markdown: emphasis, code ticks, links and HTML tags dropped."""
    src = src[:_MAX_INLINE_SRC]
    if not _MARKUP_CHARS.search(src):
        return collapse(src)
    try:
        tokens = _INLINE_MD.parseInline(src)
    except Exception:  # a title is never worth failing a document for
        return collapse(TAG_RE.sub(" ", src))
    out: list[str] = []
    for tok in tokens:
        for child in tok.children or ():
            if child.type in ("text", "code_inline", "image"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append(" ")
    text = collapse("".join(out))
    if "**" in text and "\\*" not in src:
        # CommonMark does not close `**` between CJK punctuation and a letter
        # (`**NCCL（...）**版本一致`); drop such leftover pairs.
        text = _LEFTOVER_BOLD_RE.sub(r"\1", text)
    return text


def collapse(s: str) -> str:
    return _SPACE_RE.sub(" ", s).strip()


def cut(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def strip_colon(title: str) -> str:
    return title.rstrip().rstrip(":：").rstrip()


# A title that names a failure, in either language: an error, a hang, something that cannot be done.
_PROBLEM_RE = re.compile(
    r"\b(?:error|errors|fail|fails|failed|failing|failure|exception|timeout|timed out|hangs?|hung|stuck|"
    r"crash(?:es|ed)?|cannot|can't|unable|not found|not supported|unsupported|invalid|mismatch|abnormal|"
    r"wrong|incorrect|incompatible|damaged|corrupt(?:ed)?|broken|slow|oom|out of memory|refused|denied)\b|"
    r"\w+(?:Error|Exception)\b|"
    r"报错|错误|失败|超时|卡住|卡死|挂起|异常|无法|不能|找不到|不支持|不兼容|不一致|不匹配|不正确|损坏|慢|崩溃|出错",
    re.I,
)


def names_a_problem(title: str) -> bool:
    """A question, or a statement of a failure ("Converting fails with -300", "编译报错")."""
    t = title.rstrip()
    return is_question(t) or t.endswith(("?", "？")) or bool(_PROBLEM_RE.search(t))


def is_question(title: str) -> bool:
    m = _QUESTION_RE.match(title)
    return m is not None and bool(title[m.end() :].strip())


def strip_question(title: str) -> str:
    m = _QUESTION_RE.match(title) or QUESTION_LOOSE_RE.match(title)
    return title[m.end() :].strip() if m else title


def is_report(sub_titles: list[str]) -> bool:
    """Sub-headings that read as the parts of one problem report (symptom, cause, solution)."""
    if len(sub_titles) < 2 or any(is_question(t) for t in sub_titles):
        return False
    parts = [report_key(t) for t in sub_titles]
    problem = sum(1 for p in parts if _REPORT_PROBLEM_RE.match(p))
    solution = sum(1 for p in parts if _REPORT_SOLUTION_RE.match(p))
    return problem >= 1 and solution >= 1 and 2 * (problem + solution) >= len(parts)


def is_report_part(title: str) -> bool:
    key = report_key(title)
    return bool(_REPORT_PROBLEM_RE.match(key) or _REPORT_SOLUTION_RE.match(key))


def report_key(title: str) -> str:
    """`1. 1 计算环境` -> `计算环境`: a sub-heading without its numbering and trailing colon."""
    return strip_colon(_NUMBERING_RE.sub("", title))


def line_title(line: str) -> str:
    """Text of one source line used as a title: block markers (`#`, `>`, `-`, `1.`) dropped."""
    return inline_text(_BLOCK_MARKER.sub("", line[:_MAX_INLINE_SRC]))


def first_text(lines: list[str]) -> str:
    for line in lines:
        text = line_title(line)
        if text:
            return cut(text, MAX_DOC_TITLE)
    return ""
