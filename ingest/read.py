"""Find FAQ files under the given paths and decode them; report what cannot be read."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".md", ".markdown", ".txt")
# A larger file is almost certainly not an FAQ page (a dump, a dataset); refuse it by name
# instead of spending minutes parsing it. Overridable for unusual knowledge bases.
MAX_FILE_BYTES = int(os.environ.get("KB_MAX_FILE_BYTES", 32 * 1024 * 1024))
# A FAQ line is a sentence or a log line; a megabyte on one line is minified or generated text
# (a JSON dump, an inlined image) that would become one useless, slow-to-index entry.
MAX_LINE_CHARS = int(os.environ.get("KB_MAX_LINE_CHARS", 1024 * 1024))


@dataclass(frozen=True)
class SourceFile:
    path: Path  # where it was read from
    doc: str  # path relative to the ingested folder, '/'-separated: what citations show


@dataclass(frozen=True)
class Problem:
    doc: str
    reason: str

    def __str__(self) -> str:
        return f"{self.doc}: {self.reason}"


class UnreadableFile(Exception):
    """The file exists but is not text we can decode; the message says why."""


def find_files(paths: Iterable[str | Path]) -> tuple[list[SourceFile], list[Problem]]:
    """Expand folders into FAQ files. With several roots, docs are prefixed by the root's name
    so that two `faq.md` files cannot collide."""
    roots = [Path(p) for p in paths]
    prefix_roots = len(roots) > 1
    found: list[SourceFile] = []
    problems: list[Problem] = []
    seen: set[Path] = set()
    for root in roots:
        if not root.exists():
            problems.append(Problem(str(root), "no such file or folder"))
            continue
        if root.is_file():
            files = [(root, root.name)]
        else:
            files = [(p, p.relative_to(root).as_posix()) for p in _walk(root, problems)]
        for path, rel in files:
            # realpath, not Path.resolve(): resolve() raises on a file link loop (a.md -> b.md -> a.md),
            # which would abort the whole ingest; the loop is reported by read_text instead.
            real = Path(os.path.realpath(path))
            if real in seen:  # the same file reached twice through a link
                continue
            seen.add(real)
            doc = f"{root.name}/{rel}" if prefix_roots and root.is_dir() else rel
            found.append(SourceFile(path=path, doc=doc))
    found.sort(key=lambda f: f.doc)
    return found, problems


def _walk(root: Path, problems: list[Problem]) -> list[Path]:
    out: list[Path] = []
    visited: set[str] = set()
    # followlinks so that a linked docs folder is indexed; `visited` breaks link loops.
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=None):
        real = os.path.realpath(dirpath)
        if real in visited:
            rel = Path(dirpath).relative_to(root).as_posix()
            problems.append(Problem(rel, "skipped: folder link loops back to a folder already read"))
            dirnames[:] = []
            continue
        visited.add(real)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.lower().endswith(SUFFIXES) and not name.startswith("."):
                out.append(Path(dirpath) / name)
    return out


def read_text(path: Path) -> str:
    """Decode a file as UTF-8 (BOM allowed) or GB18030/GBK; raise UnreadableFile otherwise."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UnreadableFile(
                f"too large ({size} bytes > {MAX_FILE_BYTES}); set KB_MAX_FILE_BYTES to allow it"
            )
        data = path.read_bytes()
    except FileNotFoundError as e:
        if path.is_symlink():
            raise UnreadableFile(f"is a link to a missing file ({os.readlink(path)})") from e
        raise UnreadableFile("disappeared before it could be read") from e
    except IsADirectoryError as e:
        raise UnreadableFile("is a folder") from e
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnreadableFile("is a link that loops back to itself") from e
        raise UnreadableFile(f"cannot be read: {e.strerror or e}") from e
    text = decode(data)
    longest = max((len(line) for line in text.split("\n")), default=0)
    if longest > MAX_LINE_CHARS:
        raise UnreadableFile(
            f"has a line of {longest} characters (limit {MAX_LINE_CHARS}): generated or minified text, "
            "not a FAQ document; set KB_MAX_LINE_CHARS to allow it"
        )
    return text


def decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\x00" in data[:65536]:
        raise UnreadableFile("binary content (NUL bytes), not a text document")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = data.decode("gb18030")
        except UnicodeDecodeError as e:
            raise UnreadableFile("not UTF-8 or GB18030/GBK text") from e
    if _looks_binary(text):
        raise UnreadableFile("binary content (control characters), not a text document")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _looks_binary(text: str) -> bool:
    sample = text[:65536]
    if not sample:
        return False
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\n\r\t\f\v\x1b")
    return control / len(sample) > 0.02
