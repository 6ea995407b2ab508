"""Find FAQ files under the given paths and decode them; report what cannot be read.

What a docs folder may hold besides FAQ pages, and what each becomes (docs/reliability.md, 1):
- links: followed while they stay inside the folder being ingested. One that leaves it
  (`passwd.md -> /etc/passwd`, a linked folder elsewhere) is skipped and named: a docs repository
  anyone can push to must not publish the machine's files. `--follow-links-outside` follows them.
- anything that is not a regular file (a FIFO named `pipe.md`, a link to `/dev/zero`, a socket):
  skipped by its kind. A FIFO would block the read forever and a device never ends, so files are
  opened non-blocking, checked with fstat on the open descriptor (no swap between check and
  read), and read only up to the size limit (st_size is not trusted: /proc and devices report 0).
- a file name that is not UTF-8 (a GBK name from an archive): indexed under its name decoded as
  GB18030 (else with \\xNN escapes), with a warning; control characters in any name are shown as
  \\xNN, so a name cannot drive the terminal that prints it.
- UTF-16 text (with a BOM, or without one when every other byte is NUL): decoded, not "binary".
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import KbError
from .limits import DEFAULT, Limits

SUFFIXES = (".md", ".markdown", ".txt")

_FILE_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class SourceFile:
    path: Path  # where it was read from
    doc: str  # path relative to the ingested folder, '/'-separated, printable: what citations show
    note: str = ""  # something about the file worth a warning even though it is indexed
    # The real folder it must still be in when it is opened (None: links out were allowed).
    within: str | None = None


@dataclass(frozen=True)
class Problem:
    doc: str
    reason: str
    skipped: bool = True  # False: the file was indexed, but not all of it or not as it should be

    def __str__(self) -> str:
        return f"{self.doc}: {self.reason}"


class UnreadableFile(KbError):
    """The file exists but is not text we can decode; the message says why."""


def printable(text: str) -> str:
    """Control characters (and bidi overrides) as \\xNN / \\uNNNN, lone surrogates (undecodable
    bytes of a name) as their \\xNN byte: safe to print on a terminal or store as JSON."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def doc_label(rel: str) -> tuple[str, str]:
    """(printable doc name, note) for a relative path as os.walk gives it (undecodable bytes as
    surrogates). A name that is not UTF-8 is read as GB18030 when it is that, else escaped."""
    raw = rel.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
        note = ""
    except UnicodeDecodeError:
        try:
            rel = raw.decode("gb18030")
            note = f"its name is not UTF-8 (read as GB18030: {printable(rel)}); rename it to UTF-8 so links to it work"
        except UnicodeDecodeError:
            note = (
                f"its name is not UTF-8 (shown as {printable(rel)}); rename it to UTF-8 so links to it work"
            )
    shown = printable(rel)
    if not note and shown != rel:
        note = f"its name has control characters (shown as {shown}); rename it"
    return shown, note


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _outside_reason(path: Path, target: str) -> str:
    what = "folder" if os.path.isdir(path) else "file"
    return (
        f"is a link to {printable(target)}, outside the folder being ingested; not followed "
        f"(a {what} link out of the docs could publish any file of this machine: "
        "pass --follow-links-outside to include it)"
    )


def find_files(
    paths: Iterable[str | Path], follow_links_outside: bool = False
) -> tuple[list[SourceFile], list[Problem]]:
    """Expand folders into FAQ files. With several roots, docs are prefixed by the root's name
    so that two `faq.md` files cannot collide. Links leaving a root folder are reported, not
    followed, unless `follow_links_outside`."""
    roots = [Path(p) for p in paths]
    prefix_roots = len(roots) > 1
    found: list[SourceFile] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    docs: set[str] = set()
    for root in roots:
        if not root.exists():
            problems.append(Problem(printable(str(root)), "no such file or folder"))
            continue
        if root.is_file():  # a file named on the command line is read wherever it points
            # realpath, not Path.resolve(): resolve() raises on a file link loop (a.md -> b.md -> a.md),
            # which would abort the whole ingest; the loop is reported by read_text instead.
            files, tree = [(root, root.name, os.path.realpath(root))], None
        else:
            tree = None if follow_links_outside else os.path.realpath(root)
            files = _walk(root, problems, tree)
        for path, rel, real in files:
            doc, note = doc_label(f"{root.name}/{rel}" if prefix_roots and root.is_dir() else rel)
            if tree is not None and not _inside(real, tree) and os.path.lexists(real):
                problems.append(Problem(doc, _outside_reason(path, real)))
                continue
            if real in seen:  # the same file reached twice through a link
                continue
            seen.add(real)
            if doc in docs:
                problems.append(Problem(doc, "has the same name as another file once its name is decoded"))
                continue
            docs.add(doc)
            found.append(SourceFile(path=path, doc=doc, note=note, within=tree))
    found.sort(key=lambda f: f.doc)
    return found, problems


def _walk(root: Path, problems: list[Problem], tree: str | None) -> list[tuple[Path, str, str]]:
    """FAQ files under `root` in os.walk's order, as (path, path relative to root, real path).

    Only links are resolved (os.path.realpath): any other entry's real path is its folder's real
    path plus its name. Resolving every file instead took 1.1 s of a 2.2 s walk over 11,858 files
    (147k lstat calls), most of re-ingesting a 100k-entry knowledge base after a one-file edit."""
    out: list[tuple[Path, str, str]] = []
    visited: set[str] = set()
    # Links are followed so that a linked docs folder is indexed; `visited` breaks link loops, and
    # a folder link leaving `tree` is not entered (unless tree is None: the user asked for it).
    stack = [(str(root), os.path.realpath(root), "")]
    while stack:
        folder, real, rel = stack.pop()
        if real in visited:
            problems.append(
                Problem(doc_label(rel or ".")[0], "a folder link that loops back to a folder already read")
            )
            continue
        visited.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:  # unreadable or vanished folder: skipped, as os.walk does
            continue
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            target = os.path.realpath(entry.path) if entry.is_symlink() else os.path.join(real, entry.name)
            child = f"{rel}/{entry.name}" if rel else entry.name
            if not _is_folder(entry):
                if entry.name.lower().endswith(SUFFIXES):
                    out.append((Path(entry.path), child, target))
            elif tree is not None and not _inside(target, tree):
                problems.append(Problem(doc_label(child)[0], _outside_reason(Path(target), target)))
            else:
                subfolders.append((entry.path, target, child))
        stack.extend(reversed(subfolders))
    return out


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows links, like os.walk(followlinks=True)
    except OSError:
        return False


def read_text(path: Path, limits: Limits = DEFAULT, data: bytes | None = None) -> str:
    """Decode a file (or its bytes, when already read) as UTF-8 (BOM allowed), UTF-16 or
    GB18030/GBK; raise UnreadableFile otherwise."""
    if data is None:
        data = read_bytes(path, limits)
    text = decode(data)
    longest = max((len(line) for line in text.split("\n")), default=0)
    if longest > limits.max_line_chars:
        raise UnreadableFile(
            f"has a line of {longest} characters (limit {limits.max_line_chars}): generated or minified text, "
            "not a FAQ document; set KB_MAX_LINE_CHARS to allow it"
        )
    return text


def read_bytes(path: Path, limits: Limits = DEFAULT, within: str | None = None) -> bytes:
    """The file's bytes, within the size limit; with `within`, only while it is still a file of
    that folder (see _read_bytes)."""
    return _read_bytes(path, limits.max_file_bytes, within)


def _opened_path(fd: int, path: Path) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")  # what was opened, not what the name is now
    except OSError:
        return os.path.realpath(path)


def _read_bytes(path: Path, max_bytes: int, within: str | None = None) -> bytes:
    """At most `max_bytes` of a regular file. O_NONBLOCK: opening a FIFO must not wait for a
    writer; fstat on the descriptor: what is read is what was checked. `within`: the walk found
    the file inside this folder, but the name is opened later; a file swapped for a link out of
    it in between was read and indexed (a probe won that race in 2 of 3 runs), so the opened
    file's own path is checked again."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as e:
        if os.path.islink(path):
            raise UnreadableFile(f"is a link to a missing file ({printable(os.readlink(path))})") from e
        raise UnreadableFile("disappeared before it could be read") from e
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnreadableFile("is a link that loops back to itself") from e
        if e.errno == errno.ENXIO:  # a socket
            raise UnreadableFile("is a socket, not a regular file; only files are read") from e
        raise UnreadableFile(f"cannot be read: {e.strerror or e}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _FILE_KINDS.get(stat.S_IFMT(mode), "something other than a file")
            if stat.S_ISDIR(mode):
                raise UnreadableFile("is a folder")
            raise UnreadableFile(f"is {kind}, not a regular file; only files are read")
        if within is not None and not _inside(_opened_path(fd, path), within):
            raise UnreadableFile(
                "became a link out of the folder being ingested while it was read; not followed "
                "(ingest again once the folder stops changing)"
            )
        chunks, size = [], 0
        while size <= max_bytes:
            try:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            except OSError as e:
                raise UnreadableFile(f"cannot be read: {e.strerror or e}") from e
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise UnreadableFile(f"too large (over {max_bytes} bytes); set KB_MAX_FILE_BYTES to allow it")
        return b"".join(chunks)
    finally:
        os.close(fd)


_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = decode_unicode(data)
    if text is None:
        if b"\x00" in data:  # the whole file: a binary tail after 64 KiB of text is binary too
            raise UnreadableFile("binary content (NUL bytes), not a text document")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            try:
                text = data.decode("gb18030")
            except UnicodeDecodeError as e:
                raise UnreadableFile("not UTF-8, UTF-16 or GB18030/GBK text") from e
    if "\x00" in text or looks_binary(text):
        raise UnreadableFile("binary content (control characters), not a text document")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def decode_unicode(data: bytes) -> str | None:
    """Text with a byte-order mark, or BOM-less UTF-16 (every other byte NUL, as markdown's ASCII
    gives in UTF-16); None for anything else."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as e:
                raise UnreadableFile(
                    f"starts with a {encoding} byte-order mark but is not {encoding} text"
                ) from e
    sample = data[:4096]
    if len(data) % 2 or len(sample) < 16 or b"\x00" not in sample:
        return None
    even, odd = sample[0::2].count(0) / len(sample[0::2]), sample[1::2].count(0) / len(sample[1::2])
    utf16 = "utf-16-le" if odd > 0.3 and even < 0.05 else "utf-16-be" if even > 0.3 and odd < 0.05 else None
    if utf16 is None:
        return None
    try:
        return data.decode(utf16)
    except UnicodeDecodeError:
        return None


def looks_binary(text: str) -> bool:
    """More than 2% control characters (not whitespace or ANSI colour escapes) in the first 64K:
    an executable, an archive or a checkpoint decoded as text."""
    sample = text[:65536]
    if not sample:
        return False
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\n\r\t\f\v\x1b")
    return control / len(sample) > 0.02
