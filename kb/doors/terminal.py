"""What `kb` prints besides an answer: the query it reads (argument, `-` or a pipe), `kb search`
and `kb stats` for people, errors as JSON for scripts, and the checks before `kb ingest` writes.

Part of the terminal door (kb/doors/cli.py builds the commands); standard library and kb.config only at import.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

from ..config import MAX_K

# What FAQ text, a pasted query or a model's answer may carry, printed raw to a terminal: OSC 52
# writes the clipboard, `\x1b[2K\r` hides a command behind another line. Newlines and tabs stay.
# Bidirectional overrides reorder what a line shows (a command reads other than it runs).
_CONTROL = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b.?|"
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


class PrintableStream:
    """stdout whose text goes out without escape sequences or control characters."""

    def __init__(self, stream) -> None:
        self._stream = stream

    @classmethod
    def around(cls, stream):
        return stream if isinstance(stream, cls) else cls(stream)

    def write(self, text: str) -> int:
        return self._stream.write(_CONTROL.sub("", text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def k_value(text: str) -> int:
    """`--k`: a whole number from 1 to MAX_K (0, -1 and 1000 used to be taken silently)."""
    import argparse

    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_K}, not {text!r}") from None
    if not 1 <= k <= MAX_K:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_K}, not {k}")
    return k


def read_query(text: str | None, settings, command: str, stdin=None) -> str:
    """The query: the argument, or stdin for '-' or when nothing is given and stdin is a pipe
    (`cat log | kb ask`). A paste over the query limit is cut to the part that matters (kb/query.py
    `excerpt`) with a note on stderr; only one over MAX_PASTE_BYTES is refused."""
    from ..errors import QueryError
    from ..query import MAX_PASTE_BYTES, check_query, decode_paste, excerpt, size_error

    stdin = stdin or sys.stdin
    what = (
        f'give the error or question, e.g. kb {command} "NCCL error(2)", pipe a log '
        f"(some_job 2>&1 | kb {command}), or many queries as JSON Lines with --batch FILE"
    )
    implicit = text is None
    if text is None:
        if stdin.isatty():
            raise QueryError(what)
        text = "-"
    if text == "-":
        raw = stdin.buffer.read(MAX_PASTE_BYTES + 1)
        if len(raw) > MAX_PASTE_BYTES:
            raise QueryError(
                size_error(len(raw), MAX_PASTE_BYTES, "Send the part of the log around the error.")
            )
        text = decode_paste(raw)  # a GBK terminal's or PowerShell's UTF-16 log too
        if implicit and not text.strip():  # nothing typed and nothing piped
            raise QueryError(what)
    size = len(text.encode("utf-8", errors="replace"))
    if settings.max_query_bytes < size <= MAX_PASTE_BYTES:
        part = excerpt(text, settings.max_query_bytes)
        if not part.lines_kept:  # one line over the limit: nothing whole to keep
            raise QueryError(size_error(size, settings.max_query_bytes))
        print(f"kb {command}: {excerpt_note(part)}", file=sys.stderr)
        text = part.text
    return check_query(text, settings.max_query_bytes)


def excerpt_note(part) -> str:
    """What was kept of a long paste, in one line (the chat says the same)."""
    mb = part.bytes_total / 1024 / 1024
    errors = f", the regions around {part.error_lines} error lines" if part.error_lines else ""
    return (
        f"the paste is {mb:.1f} MB ({plural(part.lines_total, 'line')}); searching {part.lines_kept} of its lines: "
        f"the first and the last lines{errors} (KB_MAX_QUERY_BYTES)"
    )


def print_json_error(command: str, message: str, status: int = 1) -> None:
    """With --json an error is one JSON object on stdout too, so a script reads one shape."""
    print(json.dumps({"error": f"kb {command}: {message}", "status": status}, ensure_ascii=False))


def search_text(result, docs_base_url: str = "") -> str:
    """`kb search` for people: each hit's title, place and language, its commands (with their
    caution: what they destroy, what to fill in) when the match is a match, and how strong it is."""
    from ..answer import LABELS, matched_line, no_match_text
    from ..present import cautioned

    lang = result.lang if result.lang in LABELS else "en"
    labels = LABELS[lang]
    out: list[str] = []
    if result.no_match:
        out.append(no_match_text(result, lang))
        if result.suggestions:
            out.append(labels["suggest"])
    else:
        label = labels["match"] if result.strength == "match" else labels["weak_badge"]
        out.append(f"{label} ({'confidence' if lang == 'en' else '置信度'} {result.confidence or 0:.2f})")
    for n, h in enumerate(result.hits or result.suggestions, 1):
        e = h.entry
        out.append(f"{n}. {e.title}\n   {e.location} [{e.lang}]  score={h.score:.4f}")
        if h.translation is not None:
            out.append(f"   {h.translation.lang}: {h.translation.title} ({h.translation.location})")
        quoted = matched_line(result, n - 1) if result.hits else ""
        if quoted:
            out.append(f"   {labels['matched_line']}: {quoted}")
        if result.no_match or result.weak or n > 1:
            continue  # commands from the match only: the others may be other problems (kb/schema.py)
        for c, caution in cautioned(e.commands[:6], lang):
            if caution:
                out.append(f"   # {caution}")
            out.append("   $ " + c.replace("\n", "\n     "))
    return "\n".join(out)


def stats_text(stats: dict) -> str:
    """`kb stats` for people (`--json` prints the dict)."""
    emb = stats["embedder"]
    emb_id = emb.get("id", "?") if isinstance(emb, dict) else emb
    lines = [
        f"index:    {stats['index']}",
        f"entries:  {stats['entries']} (zh {stats['languages']['zh']}, en {stats['languages']['en']}; "
        f"{stats['linked_translations']} linked to their translation)",
        f"embedder: {emb_id}",
        f"built:    {stats['built_at']} (generation {stats['generation']})",
    ]
    ranker = stats.get("ranker") or {}
    if ranker:
        lines.append(
            f"ranker:   {ranker['model']} (fitted {ranker.get('fitted_at') or '?'} for {ranker.get('embedder') or '?'})"
        )
    sources = stats.get("sources") or []
    lines.append("sources:  " + ("\n          ".join(sources) if sources else "-"))
    for label, notes in (("skipped", stats.get("skipped")), ("warnings", stats.get("warnings"))):
        if notes:
            lines.append(f"{label + ':':10}" + "\n          ".join(notes))
    return "\n".join(lines)


def print_ingest(outcome) -> None:
    """What `kb ingest` says: skipped files and caveats on stderr, then the counts."""
    # Doc names and reasons are made printable where they are made (ingest/read.py).
    for p in outcome.problems:
        print(f"skipped {p}", file=sys.stderr)
    for p in outcome.warnings:
        print(f"warning {p}", file=sys.stderr)
    print(
        f"indexed {plural(outcome.entries, 'entry').replace('entrys', 'entries')} from "
        f"{plural(outcome.files, 'file')} into {outcome.index} "
        f"({outcome.embedded} texts embedded, {outcome.reused} reused, {outcome.seconds:.1f}s)"
    )
    if outcome.changes:
        print(changes_line(outcome.changes))
    if outcome.dropped_sources:
        old = shlex.join(outcome.dropped_sources)
        print(
            f"note: this index was built from {old} before; it now holds only the paths given. To keep "
            f"that too, give it with them: kb ingest {old} <the paths you gave> --index {shlex.quote(outcome.index)}",
            file=sys.stderr,
        )


def search_hint(index: str) -> str:
    """The next step after building an index that `kb ask` does not read by default: without it, a
    newcomer's first `kb ask` answers from the bundled knowledge base, not from the documents just
    ingested."""
    folder = shlex.quote(index)
    return (
        f'next: kb ask --index {folder} "<your error or question>" '
        f"(or export KB_INDEX={folder} to make it the default)"
    )


def changes_line(changes: dict[str, list[str]], shown: int = 5) -> str:
    """What a re-ingest found: "changed: a.md · new: b.md · removed: c.md", or that nothing did."""
    parts = []
    for key, label in (("changed", "changed"), ("added", "new"), ("removed", "removed")):
        docs = changes.get(key) or []
        if docs:
            more = f" and {len(docs) - shown} more" if len(docs) > shown else ""
            parts.append(f"{label}: {', '.join(docs[:shown])}{more}")
    return " · ".join(parts) if parts else "no document changed since the last build"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def check_index_folder(index_dir) -> None:
    """`kb ingest --index DIR` writes only into an index or a new or empty folder: a folder of
    other files (`--index docs/`) is refused instead of being filled without a word."""
    from pathlib import Path

    from ..errors import KbError

    folder = Path(index_dir)
    if not folder.exists() or (folder / "manifest.json").exists():
        return
    if not folder.is_dir():
        raise KbError(f"--index {folder} is a file; give a folder for the index, e.g. --index ./kb-index")
    # What a build leaves before its first manifest (its lock, an interrupted generation).
    leftovers = (".lock", "gen-", "bundled.fingerprint")
    if any(not p.name.startswith(leftovers) for p in folder.iterdir()):
        raise KbError(
            f"{folder} is not an index and not empty; give a new or empty folder for the index, "
            "e.g. --index ./kb-index"
        )
