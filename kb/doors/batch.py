"""`kb search --batch FILE` and `kb ask --batch FILE`: many queries in one process.

Every `kb` call is a new process and pays its cold start (imports, index load, model load) once;
a script or CI job with a few hundred queries pays it once in all with --batch. FILE (or '-' for
stdin) is JSON Lines, one query per line:

    {"id": "dev-001", "text": "NCCL error ...", "lang": "en"}   # id and lang optional

("query" is accepted for "text"; a line that is a bare JSON string is the text; "lang" is the
answer language, as --lang, and a value other than "zh" or "en" is ignored, so that a data set
whose "lang" labels its posts, "mixed" included, can be given as it is.) For each line,
in order, one JSON line is written to stdout: the `--json` object of that command with the
input's line number ("line", counted from 1) and the line's "id" when it had one, or {"id": ...,
"line": n, "error": "..."} for a line that is not a query (bad JSON, empty or oversized text);
such a line does not stop the batch, and the exit code is 1 when any line failed. Blank lines
are skipped: "line" is how a script without ids lines its answers up with its input. Measured in
eval/results/bench.md (the 139 real posts of ../shared/eval/real_dev.jsonl).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

from ..errors import KbError


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines of FILE, '-' for stdin."""
    if path == "-":
        stream: Iterable[bytes] = sys.stdin.buffer
        yield from _numbered(stream)
        return
    with open(path, "rb") as f:
        yield from _numbered(f)


def _numbered(stream: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    for n, raw in enumerate(stream, 1):
        # utf-8-sig: a file saved by a Windows editor or Excel starts with a byte-order mark.
        line = raw.decode("utf-8-sig" if n == 1 else "utf-8", errors="replace").strip()
        if line:
            yield n, line


def parse_line(line: str) -> tuple[object, str, str | None]:
    """(id, text, lang) of one line; LineError (with the line's id when it has one) says what
    is wrong with it. A "lang" other than "zh"/"en" (a data set's label such as "mixed") is not
    an answer language and is ignored."""
    try:
        item = json.loads(line)
    except json.JSONDecodeError as e:
        raise LineError(None, f"not JSON ({e.msg})") from None
    if isinstance(item, str):
        return None, item, None
    if not isinstance(item, dict):
        raise LineError(None, 'expected an object with "text" (or a JSON string)')
    ident = item.get("id")
    text = item.get("text", item.get("query"))
    if not isinstance(text, str):
        raise LineError(ident, 'no "text" string')
    lang = item.get("lang")
    return ident, text, lang if lang in ("zh", "en") else None


class LineError(ValueError):
    def __init__(self, ident: object, message: str) -> None:
        super().__init__(message)
        self.ident = ident


def run_batch(
    lines: Iterable[tuple[int, str]],
    answer: Callable[[str, str | None], dict],
    check: Callable[[str], str],
    out: TextIO,
) -> int:
    """Answer every line (`check` validates a text, `answer(text, lang)` gives its JSON object);
    the exit code: 0, or 1 when a line failed."""
    failed = False
    for n, line in lines:
        ident: object = None
        try:
            ident, text, lang = parse_line(line)
            result = answer(check(text), lang)
        except (ValueError, KbError) as e:
            failed = True
            ident = e.ident if isinstance(e, LineError) else ident
            result = {"error": str(e)}
        result = {"line": n, **result}
        if ident is not None:
            result = {"id": ident, **result}
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        out.flush()
    return 1 if failed else 0


def batch_command(args, settings, answer: Callable) -> int:
    """`kb search|ask --batch FILE`: every line answered by `answer(kb, text, lang)`. The
    knowledge base is opened once, quietly (stdout is the JSON Lines), and without recording
    "no match" in the unanswered queue: a script's batch is not a person asking."""
    if args.text is not None:
        raise SystemExit(f"kb {args.command}: give either the text or --batch FILE, not both")
    from ..progress import ProgressBar
    from ..query import check_query
    from ..service import KnowledgeBase

    kb = KnowledgeBase.open(settings=settings, progress=ProgressBar(quiet=True))
    return run_batch(
        read_lines(args.batch),
        lambda text, lang: answer(kb, text, lang),
        lambda text: check_query(text, settings.max_query_bytes),
        sys.stdout,
    )
