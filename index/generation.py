"""Writing a generation: all of it in a `.partial` folder, then one atomic switch.

A build writes a new generation folder completely, then replaces manifest.json with one
os.replace (atomic on POSIX). A build killed midway leaves the old manifest pointing at the old,
complete generation; the next build removes the debris. A generation is never modified once
written, which is what lets the next one share its large files (index/segments.py) by hard link.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .store import IndexError_, read_manifest


def generation_name() -> str:
    # The random part keeps two builds in one second of one process (a server's rebuild, a
    # test) from colliding with the generation that is live.
    return f"gen-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"


@contextmanager
def build_lock(directory: Path, wait: bool = True) -> Iterator[None]:
    """One build at a time per index directory; a second `kb ingest` waits (or refuses)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as e:
            raise IndexError_(f"another `kb ingest` is building {directory}; try again when it ends") from e
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_generation(
    directory: Path, gen_name: str, fill: Callable[[Path], None], manifest: Callable[[], dict], needed: int
) -> None:
    """fill(tmp) writes the generation's files into its `.partial` folder; then the folder and the
    manifest that makes it live are put in place. On any failure the old generation stays live
    and what this build wrote is removed (a full disk is named as such)."""
    gen = directory / gen_name
    tmp = directory / (gen_name + ".partial")
    try:
        tmp.mkdir(parents=True)
        fill(tmp)
        _fsync_dir(tmp)
        os.replace(tmp, gen)

        tmp_manifest = directory / "manifest.json.partial"
        tmp_manifest.write_text(json.dumps(manifest(), ensure_ascii=False, indent=1), "utf-8")
        with open(tmp_manifest, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_manifest, directory / "manifest.json")
        _fsync_dir(directory, files=False)
        _remove_stale(directory, keep=gen_name)
    except BaseException as e:
        # Disk full, a permission error, Ctrl+C: the old generation stays live; remove what this
        # build wrote so a full disk is not left fuller (a SIGKILL's debris goes at the next build).
        full = _disk_full(e, directory, needed)
        _discard(directory, gen_name)
        if full is not None:
            raise full from e
        raise


def _disk_full(error: BaseException, directory: Path, needed: int) -> OSError | None:
    """A write that failed because the disk is full, as an error that says so, where, and how
    much is needed. numpy says only "N requested and M written" and faiss "fwrite ... failed"
    (no errno), so a failed write on a disk with less free space than the index needs counts too."""
    if not isinstance(error, OSError | RuntimeError):
        return None
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    code = getattr(error, "errno", None)
    if code not in (errno.ENOSPC, errno.EDQUOT) and (code is not None or free >= needed):
        return None
    mib = 1 << 20
    return OSError(
        errno.ENOSPC,
        f"No space left on device: the disk holding {directory} is full ({free / mib:.1f} MiB free; "
        f"this index needs about {needed / mib:.1f} MiB). Free some space there, or build elsewhere "
        f"with --index, and run kb ingest again (the previous index is unchanged)",
    )


def _fsync_dir(path: Path, files: bool = True) -> None:
    for f in path.iterdir() if files and path.is_dir() else ():
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(directory: Path, gen_name: str) -> None:
    try:
        live = (read_manifest(directory) or {}).get("generation")
    except IndexError_:
        live = None
    if live != gen_name:
        shutil.rmtree(directory / gen_name, ignore_errors=True)
    shutil.rmtree(directory / (gen_name + ".partial"), ignore_errors=True)
    (directory / "manifest.json.partial").unlink(missing_ok=True)


def _remove_stale(directory: Path, keep: str) -> None:
    """Old generations and debris of killed builds. A reader that opened the old generation
    keeps its memory maps; files are only unlinked."""
    for p in directory.iterdir():
        if p.name.startswith("gen-") and p.name != keep and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
