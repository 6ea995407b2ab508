"""Read, parse and annotate every FAQ file under the given paths."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .entry import Entry
from .lang import guess_lang
from .parse import parse_markdown
from .read import Problem, UnreadableFile, find_files, read_text
from .signals import commands, signatures

FileProgress = Callable[[int, int, str], None]  # (files done, files total, doc)
_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


@dataclass
class IngestReport:
    entries: list[Entry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: int = 0  # files that produced entries or were read without error


def doc_language(doc: str, text: str) -> str:
    """Path conventions (`/zh/`, `_cn`, `/en/`) win; otherwise the prose decides."""
    low = "/" + doc.lower()
    if any(m in low for m in ("/zh/", "/zh_cn/", "_cn.", "_zh.", "/cn/")):
        return "zh"
    if any(m in low for m in ("/en/", "_en.")):
        return "en"
    return guess_lang(text)


def entries_from_text(doc: str, text: str) -> list[Entry]:
    lang = doc_language(doc, text)
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
                lang=lang,
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


def collect(paths: Iterable[str | Path], progress: FileProgress | None = None) -> IngestReport:
    """Entries of every readable file; each unreadable or unparsable file becomes a Problem."""
    files, problems = find_files(paths)
    report = IngestReport(problems=list(problems))
    for n, source in enumerate(files, 1):
        try:
            text = read_text(source.path)
            entries = entries_from_text(source.doc, text)
        except UnreadableFile as e:
            report.problems.append(Problem(source.doc, str(e)))
        except Exception as e:  # a parser bug on one file must not lose the others
            report.problems.append(Problem(source.doc, f"could not be parsed ({type(e).__name__}: {e})"))
        else:
            if not text.strip():
                report.problems.append(Problem(source.doc, "empty file"))
            else:
                report.files += 1
                if not entries:
                    report.problems.append(Problem(source.doc, "no FAQ entries found"))
                fence = unclosed_fence(text)
                if fence is not None:
                    report.problems.append(
                        Problem(
                            source.doc,
                            f"the code fence opened at line {fence} is never closed, so everything after it "
                            "was read as code (entries there are missing); close the fence",
                        )
                    )
                report.entries.extend(entries)
        if progress:
            progress(n, len(files), source.doc)
    return report


def unclosed_fence(text: str) -> int | None:
    """The 1-based line of a code fence that is never closed, else None. Markdown reads the rest
    of the file as code, so the questions below such a fence silently vanish."""
    open_at, marker = None, ""
    for n, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line.lstrip(" \t>"))  # fences inside lists and block quotes count too
        if not m:
            continue
        fence, rest = m.groups()
        if open_at is None:
            if fence[0] == "`" and "`" in rest:  # ```x``` on one line is inline code, not a fence
                continue
            open_at, marker = n, fence
        elif fence[0] == marker[0] and len(fence) >= len(marker) and not rest.strip():
            open_at = None
    return open_at
