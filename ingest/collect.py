"""Read, parse and annotate every FAQ file under the given paths.

A file whose bytes did not change since the index was last built is not parsed again: the
caller's `unchanged(doc, digest)` (index/build.py Builder.unchanged, over the live generation's
record of each file) says so, and the file's entries are then reused from the index. Hashing the
bytes of all 11,858 files of the 100k-entry benchmark takes ~0.2 s; parsing them took 31 s.

Each file is bounded, so one file can neither stop the others from landing nor hold the ingest:
- entries: a file with more than max_file_entries (ingest/limits.py) headings or entries is refused by name. It is
  generated text, not an FAQ page: 1e6 `## Q:` headings (23 MB) took 7 minutes and 3.2 GB before
  this cap; counting heading lines first refuses it in about a second, before markdown-it;
- time: reading and parsing one file stops after max_file_seconds (the parser is pure Python, so
  a timer signal interrupts it) and the file is reported. The timer needs the main thread (the
  `kb` CLI); elsewhere the size, line and entry caps still bound the work.
"""

from __future__ import annotations

import hashlib
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .code import fence_run, unclosed_fence
from .entry import Entry
from .lang import cjk_count, guess_lang
from .limits import DEFAULT, Limits
from .parse import parse_markdown
from .read import Problem, SourceFile, UnreadableFile, find_files, read_bytes, read_text
from .signals import commands, signatures

FileProgress = Callable[[int, int, str], None]  # (files done, files total, doc)
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.M)
Recorded = tuple[
    int, list[tuple[str, bool]]
]  # an unchanged file's entry count and problems (reason, skipped)
Unchanged = Callable[[str, str], Recorded | None]  # (doc, digest) -> what was recorded, None: parse it


@dataclass
class ParsedFile:
    """A file that was read: its entries, or None when it is unchanged (reused by the caller)."""

    doc: str
    digest: str  # sha1 of its bytes
    entries: list[Entry] | None
    count: int  # its entries
    problems: list[tuple[str, bool]]  # (reason, skipped) found in its text


@dataclass
class IngestReport:
    entries: list[Entry] = field(default_factory=list)  # the entries of the files parsed
    problems: list[Problem] = field(default_factory=list)  # skipped files, and warnings (skipped=False)
    files: int = 0  # files that produced entries (parsed now or unchanged)
    sources: list[ParsedFile] = field(default_factory=list)  # every file read, in order

    @property
    def entry_count(self) -> int:
        """Entries of every file read, parsed or unchanged."""
        return sum(s.count for s in self.sources)


# A project's own paperwork beside the FAQ pages (`kb ingest docs/` on a repository): skipped when
# nothing in it is a question, an error or a command. The name alone is not enough (a README can
# be a FAQ), nor is the shape alone (real troubleshooting pages can have neither questions nor
# commands: ascend_pytorch's ERR-001.md).
_METADATA_NAMES = re.compile(
    r"^(manifest|license|licence|notice|changelog|changes|history|contributing|code_of_conduct|security|"
    r"authors|maintainers|codeowners)([._-].*)?$",
    re.I,
)
METADATA_REASON = "project metadata, not a FAQ page (no question in its headings)"


def is_project_metadata(doc: str, entries: list[Entry]) -> bool:
    """A MANIFEST, CHANGELOG, LICENSE ... that asks no question. Commands or error strings do not
    make one a FAQ page: a corpus manifest's `git hash-object` made 19 entries of it, which came
    up among the first three for real posts. Pages that only list links (a menu) stay entries:
    dropping them was measured too, and it lowered Hit@1 on the real posts (0.567 -> 0.563) and
    showed more unanswerable posts a match (0.191 -> 0.195), cross-validated."""
    from .titles import is_question

    if not _METADATA_NAMES.match(Path(doc).name):
        return False
    return not any(is_question(e.title) or e.title.rstrip().endswith(("?", "？")) for e in entries)


class _TooSlow(BaseException):
    """Raised by the timer inside a file's parse. A BaseException, so that the parser's own
    `except Exception` fallbacks cannot swallow it."""


ALARM_REPEAT_S = 0.05  # the alarm repeats until the block ends (see time_limit)


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block with _TooSlow after `seconds` (main thread only; see the docstring).
    A timer already set by someone else (pytest-timeout) is put back with the time it had left."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    ended = False

    def on_alarm(_signum, _frame):
        if not ended:  # a repeat that arrives while the block is being left does nothing
            raise _TooSlow

    deferred: list = []

    def on_unraisable(info) -> None:
        # An alarm that landed in a __del__ is dropped; anything else raised there is handed to
        # the previous hook after the block. Handing it on at once ran that hook under the
        # repeating alarm: pytest's, importing tracemalloc, was cut by the next alarm and
        # failed a fresh checkout's test run.
        if not isinstance(info.exc_value, _TooSlow):
            deferred.append(info)

    started = time.monotonic()
    old_hook, sys.unraisablehook = sys.unraisablehook, on_unraisable
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    # Repeating: an exception raised while the interpreter runs a weakref callback or __del__
    # (garbage of earlier work collected mid-parse) is printed and dropped, and a single alarm
    # then let a 0.5 s limit run for 14 s; the next alarm lands in the parser itself.
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds, ALARM_REPEAT_S)
    try:
        yield
    finally:
        ended = True
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        sys.unraisablehook = old_hook
        if old_delay:
            left = old_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), old_interval)
        for info in deferred:
            old_hook(info)


def count_headings(text: str, enough: int = DEFAULT.max_file_entries) -> int:
    """Heading lines outside code fences: an upper bound of the entries markdown-it would make
    from headings, counted without it (exactly only when there are more than `enough`)."""
    upper = len(_HEADING.findall(text))
    if upper <= enough:  # the common case: no fence walk needed
        return upper
    count, fence = 0, ""
    for line in text.split("\n"):
        run = fence_run(line.lstrip(" "))
        if run and (not fence or (run[0][0] == fence[0] and len(run[0]) >= len(fence))):
            fence = "" if fence else run[0]
        elif not fence and _HEADING.match(line):
            count += 1
    return count


def read_entries(
    doc: str, path: Path, limits: Limits = DEFAULT, data: bytes | None = None
) -> tuple[str, list[Entry]]:
    """The file's text and entries, within the caps; UnreadableFile names the cap it broke.
    `data`: the file's bytes, when already read."""
    MAX_FILE_ENTRIES, MAX_FILE_SECONDS = limits.max_file_entries, limits.max_file_seconds  # noqa: N806
    try:
        with time_limit(MAX_FILE_SECONDS):
            text = read_text(path, limits, data)
            headings = count_headings(text, MAX_FILE_ENTRIES)
            if headings > MAX_FILE_ENTRIES:
                raise UnreadableFile(
                    f"has {headings} headings (limit {MAX_FILE_ENTRIES} entries per file): generated text, "
                    "not a FAQ page; split it, or set KB_MAX_FILE_ENTRIES to allow it"
                )
            entries = entries_from_text(doc, text)
    except _TooSlow:
        raise UnreadableFile(
            f"took over {MAX_FILE_SECONDS:g} s to read and parse; split it, or set KB_MAX_FILE_SECONDS to allow it"
        ) from None
    if len(entries) > MAX_FILE_ENTRIES:
        raise UnreadableFile(
            f"has {len(entries)} FAQ entries (limit {MAX_FILE_ENTRIES} per file): generated text, not a FAQ "
            "page; split it, or set KB_MAX_FILE_ENTRIES to allow it"
        )
    return text, entries


def path_language(doc: str) -> str | None:
    """The language a path names (`/zh/`, `_cn`, `/en/`, `_en.`), else None."""
    low = "/" + doc.lower()
    if any(m in low for m in ("/zh/", "/zh_cn/", "_cn.", "_zh.", "/cn/")):
        return "zh"
    if any(m in low for m in ("/en/", "_en.")):
        return "en"
    return None


def doc_language(doc: str, text: str) -> str:
    """Path conventions win; otherwise the prose decides."""
    return path_language(doc) or guess_lang(text)


def entry_language(text: str, file_lang: str) -> str:
    """Without a language in the path, each entry's own prose decides: a team's FAQ often keeps
    both languages in one file (Q:/A: pairs in English, then 问/答). Within a Chinese file only
    an entry without one Chinese character is English: a Chinese answer heavy with English
    names and links (`NCCL（NVIDIA Collective Communication Library）版本一致`) stays Chinese. An
    entry that is all code says nothing and takes its file's language."""
    lang = guess_lang(text, default=file_lang)
    return "zh" if file_lang == "zh" and cjk_count(text) else lang


def entries_from_text(doc: str, text: str) -> list[Entry]:
    named = path_language(doc)
    file_lang = named or guess_lang(text)
    out: list[Entry] = []
    seen: set[str] = set()
    lines = text.split("\n")
    for s in parse_markdown(text):
        entry_id = Entry.make_id(doc, s.heading_path, s.title)
        if entry_id in seen:  # two entries with the same title in one section: keep both, apart
            entry_id = Entry.make_id(doc, s.heading_path, f"{s.title}#{s.start_line}")
        seen.add(entry_id)
        out.append(
            Entry(
                id=entry_id,
                content_hash=Entry.hash_body(s.title, s.body),
                doc=doc,
                lang=named or entry_language(f"{s.title}\n{s.body}", file_lang),
                title=s.title,
                heading_path=s.heading_path,
                body=s.body,
                start_line=s.start_line,
                end_line=s.end_line,
                # The title's source line keeps its inline code (`Init plugin so failed ...`).
                signatures=signatures(
                    lines[s.start_line - 1] if s.start_line <= len(lines) else s.title, s.body
                ),
                commands=commands(s.body),
            )
        )
    return out


def collect(
    paths: Iterable[str | Path],
    progress: FileProgress | None = None,
    follow_links_outside: bool = False,
    limits: Limits = DEFAULT,
    unchanged: Unchanged | None = None,
) -> IngestReport:
    """Entries of every readable file; each unreadable or unparsable file becomes a Problem, and
    a file indexed with a caveat (an unclosed fence, a name that is not UTF-8) a warning. With
    `unchanged`, files it recognises are not parsed (see the module docstring)."""
    files, problems = find_files(paths, follow_links_outside=follow_links_outside)
    report = IngestReport(problems=list(problems))
    for n, source in enumerate(files, 1):
        parsed = _read_one(source, limits, unchanged, report.problems)
        if parsed is not None:
            report.files += 1 if parsed.count else 0  # only files that gave entries count as indexed
            report.sources.append(parsed)
            # A file's own problems around the note on its name, in the order they always had.
            report.problems += [Problem(source.doc, r, True) for r, skipped in parsed.problems if skipped]
            if source.note:
                report.problems.append(Problem(source.doc, source.note, skipped=False))
            report.problems += [
                Problem(source.doc, r, False) for r, skipped in parsed.problems if not skipped
            ]
            report.entries.extend(parsed.entries or ())
        if progress:
            progress(n, len(files), source.doc)
    return report


def _read_one(source: SourceFile, limits: Limits, unchanged: Unchanged | None, problems: list[Problem]):
    """The file read (or recognised as unchanged), or None with the reason added to `problems`."""
    try:
        data = read_bytes(source.path, limits, source.within)
        digest = hashlib.sha1(data).hexdigest()
        recorded = unchanged(source.doc, digest) if unchanged is not None else None
        if recorded is not None:
            return ParsedFile(source.doc, digest, None, recorded[0], list(recorded[1]))
        text, entries = read_entries(source.doc, source.path, limits, data)
    except UnreadableFile as e:
        problems.append(Problem(source.doc, str(e)))
        return None
    except Exception as e:  # a parser bug on one file must not lose the others
        problems.append(Problem(source.doc, f"could not be parsed ({type(e).__name__}: {e})"))
        return None
    if not text.strip():
        problems.append(Problem(source.doc, "empty file"))
        return None
    found: list[tuple[str, bool]] = [] if entries else [("no FAQ entries found", True)]
    if entries and is_project_metadata(source.doc, entries):
        entries, found = [], [(METADATA_REASON, True)]
    fence = unclosed_fence(text)
    if fence is not None:
        found.append(
            (
                f"partly indexed: the code fence opened at line {fence} is never closed, so "
                "everything after it was read as code (entries there are missing); close the fence",
                False,
            )
        )
    return ParsedFile(source.doc, digest, entries, len(entries), found)
