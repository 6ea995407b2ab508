"""What a query may be, checked once for every door: text, not binary, not empty, within the size limit.

The web API answers the same rule with 413 before reading a body it cannot use
(kb/doors/web/api.py calls `size_error`); everything else raises QueryError here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import QueryError

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """Lone surrogates (undecodable bytes in argv, "\\ud800" in a JSON body) cannot be encoded as
    UTF-8 and crash the tokenizer deep inside a search: they become U+FFFD, as bad stdin bytes do."""
    return _SURROGATE.sub("\ufffd", text)


def decode_paste(data: bytes) -> str:
    """Piped bytes as text, read as ingest reads documents: UTF-8 (a byte-order mark dropped),
    UTF-16 with a mark or without one (PowerShell's `> log.txt`), else GBK/GB18030 (a zh_CN.GBK
    terminal). A UTF-8 log with a bad byte or two stays UTF-8, those as U+FFFD: GB18030 reads
    nearly any bytes, and would garble all of it. A GBK log that is mostly ASCII (a few Chinese
    words in English output) has a few invalid UTF-8 sequences per word, so no share of the bytes
    tells them apart: the count does. Bytes that are no text in any of these are refused here,
    before a long paste is cut (kb/doors/terminal.py), so the message says what they are."""
    text = _decoded(data)
    refuse_binary(text)
    return text


def refuse_binary(text: str) -> None:
    """Binary data is no query (`kb ask - < model.ckpt`, a core dump, an API client sending a
    file's bytes): searched, its stray letters came closest to some entry, shown as a match with
    its commands (random bytes on the seeds index: 问题避免). NULs alone are a padded log's."""
    from ingest.read import looks_binary

    if looks_binary(text.replace("\x00", "")):
        raise QueryError(
            "the query looks like binary data (control characters, undecodable bytes), not text: paste "
            "the error message or the log; `strings FILE` prints the text inside a binary file"
        )


def _decoded(data: bytes) -> str:
    from ingest.read import UnreadableFile, decode_unicode

    try:
        text = decode_unicode(data)
    except UnreadableFile:
        text = None
    if text is not None:
        return text
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    utf8 = data.decode("utf-8", errors="replace")
    if utf8.count("\ufffd") <= 2:
        return utf8
    try:
        return data.decode("gb18030")
    except UnicodeDecodeError:
        return utf8


def size_error(size: int, max_bytes: int, hint: str = "Paste the part of the log around the error.") -> str:
    """The message for a query of `size` bytes over the limit (every door says the same)."""
    return f"the query is {size} bytes; the limit is {max_bytes} (KB_MAX_QUERY_BYTES). {hint}"


def check_query(query: str, max_bytes: int) -> str:
    """Refuse what no search can use, with a message that says what to do; NUL bytes become spaces."""
    if not isinstance(query, str):
        raise QueryError("the query must be text")
    size = len(query.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise QueryError(size_error(size, max_bytes))
    query = valid_text(query).replace("\x00", " ")
    if not query.strip():
        raise QueryError("the query is empty: paste an error message or ask a question")
    refuse_binary(query)
    return query


# ---- pastes over the query limit: keep the part that matters ----------------------------------
MAX_PASTE_BYTES = 24 * 1024 * 1024  # what the chat and `kb ask < log` take in before keeping a part
EXCERPT_LINE_CHARS = 2000  # a longer line is cut (a minified blob, a progress bar without newlines)
_CONTEXT = 3  # lines kept on each side of an error line


@dataclass(frozen=True)
class Excerpt:
    """The part of a paste that is searched, and what was left out (for the note a door shows)."""

    text: str
    lines_kept: int
    lines_total: int
    bytes_total: int
    error_lines: int  # error lines whose regions were kept

    @property
    def cut(self) -> bool:
        return self.lines_kept < self.lines_total or len(self.text.encode()) < self.bytes_total


def _size(line: str) -> int:
    return len(line.encode("utf-8", errors="replace")) + 1


def excerpt(text: str, max_bytes: int) -> Excerpt:
    """At most `max_bytes` of `text`: the first lines (the command and the set-up), the last lines
    (where a crash ends), and the regions around error lines and tracebacks in between, in their
    order, with a marker where lines were left out. A paste within the limit comes back whole."""
    from ingest.signals import error_lines_in

    size = len(text.encode("utf-8", errors="replace"))
    lines = text.replace("\r\n", "\n").split("\n")
    if size <= max_bytes:
        return Excerpt(text, len(lines), len(lines), size, 0)
    lines = [ln if len(ln) <= EXCERPT_LINE_CHARS else ln[:EXCERPT_LINE_CHARS] + " …" for ln in lines]
    budget = int(max_bytes * 0.95)  # room for the markers
    keep: set[int] = set()

    def take(indexes, share: float) -> None:
        nonlocal budget
        allowance = max_bytes * share
        for i in indexes:
            if i in keep:
                continue
            cost = _size(lines[i])
            if cost > budget or cost > allowance:
                return
            keep.add(i)
            budget -= cost
            allowance -= cost

    take(range(min(200, len(lines))), 0.1)
    take(range(len(lines) - 1, -1, -1), 0.4)  # the tail, read backwards
    # The last errors first: the crash is usually near the end.
    errors = list(error_lines_in(lines, (i for i in range(len(lines) - 1, -1, -1) if i not in keep)))
    for i in errors:
        take(range(max(0, i - _CONTEXT), min(len(lines), i + _CONTEXT + 1)), 1.0)
    out: list[str] = []
    previous = -1
    for i in sorted(keep):
        if i > previous + 1:
            out.append(f"[… {i - previous - 1} lines left out …]")
        out.append(lines[i])
        previous = i
    if previous < len(lines) - 1:
        out.append(f"[… {len(lines) - 1 - previous} lines left out …]")
    kept_errors = sum(1 for i in errors if i in keep)
    return Excerpt("\n".join(out), len(keep), len(lines), size, kept_errors)


def kept_note(part: Excerpt, lang: str) -> str:
    """What a door says of a paste it searched only in part (the chat and Slack; the terminal
    prints its own one line on stderr)."""
    mb = part.bytes_total / 1024 / 1024
    if lang == "zh":
        around = f"，以及 {part.error_lines} 处报错前后" if part.error_lines else ""
        return (
            f"日志共 {mb:.1f} MB、{part.lines_total} 行，超过单次检索上限：已检索其中 {part.lines_kept} 行"
            f"（开头、结尾{around}）。"
        )
    around = f", and around {part.error_lines} error lines" if part.error_lines else ""
    return (
        f"The log is {mb:.1f} MB ({part.lines_total} lines), over the search limit: searched "
        f"{part.lines_kept} of its lines (the first and the last{around})."
    )
