"""The index on a real full disk, and the served index rewritten in place under a running server
(docs/reliability.md)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from conftest import SEEDS, needs_shared
from helpers import HCCL_LINE, copy_index, manifest

pytestmark = [pytest.mark.slow, needs_shared]

FULL_DISK_SCRIPT = r"""
import json, os, shutil, subprocess, sys
mnt, seeds = sys.argv[1], sys.argv[2]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt], check=True)
kb = [sys.executable, "-m", "kb"]
index = os.path.join(mnt, "index")
first = subprocess.run([*kb, "ingest", seeds, "--index", index], capture_output=True, text=True)
gen = json.load(open(os.path.join(index, "manifest.json")))["generation"]
sizes = {f: os.path.getsize(os.path.join(index, gen, f)) for f in os.listdir(os.path.join(index, gen))}
# Without its parse cache (files.json) the next build reads every file again and writes all the
# vectors as a new segment (index/segments.py), its first file. Leave room for half of it: the
# disk fills up while the numpy array is written, where numpy says only "N requested and M written".
os.remove(os.path.join(index, gen, "files.json"))
(seg,) = [f for f in sizes if f.startswith("seg-") and f.endswith(".npy")]
room = sizes[seg] // 2
with open(os.path.join(mnt, "filler"), "wb") as fh:
    fh.write(b"\0" * max(0, shutil.disk_usage(mnt).free - room))
second = subprocess.run([*kb, "ingest", seeds, "--index", index], capture_output=True, text=True)
after = json.load(open(os.path.join(index, "manifest.json")))["generation"]
search = subprocess.run([*kb, "search", "--json", sys.argv[3], "--index", index], capture_output=True, text=True)
print(json.dumps({"first": first.returncode, "code": second.returncode, "stderr": second.stderr,
                  "same_generation": after == gen, "search": search.stdout, "left": sorted(os.listdir(index))}))
"""


def test_a_really_full_disk_is_named_with_where_and_how_much(tmp_path):
    """A tmpfs of 16 MiB in a private mount namespace, filled so the next build runs out while
    writing its vectors: the error says the disk is full, where, and how much is needed (it used
    to be numpy's "N requested and M written"); the previous index still answers."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a small disk")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    script = tmp_path / "full_disk.py"
    script.write_text(FULL_DISK_SCRIPT)
    p = subprocess.run(
        ["unshare", "-rm", sys.executable, str(script), str(mnt), str(SEEDS), HCCL_LINE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode != 0 and "mount" in p.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr[-300:]}")
    got = json.loads(p.stdout)
    assert got["first"] == 0
    last = got["stderr"].strip().splitlines()[-1]
    assert got["code"] == 1 and "Traceback" not in got["stderr"], got["stderr"]
    assert last.startswith(
        f"kb ingest: [Errno 28] No space left on device: the disk holding {mnt}/index is full"
    )
    assert re.search(r"\(\d+\.\d MiB free; this index needs about \d+\.\d MiB\)", last), last
    assert "requested and" not in last
    assert got["same_generation"]
    assert json.loads(got["search"])["hits"][0]["title"].find(HCCL_LINE) >= 0  # the old index answers
    assert [n for n in got["left"] if n.endswith(".partial")] == []  # the failed build cleaned up


def _search(base: str, query: str) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        base + "/api/search",
        data=json.dumps({"query": query, "k": 1}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_rewriting_the_served_faiss_index_in_place_does_not_kill_the_server(seeds_index, tmp_path):
    """`cp other/faiss.index DIR/gen-.../faiss.index` truncates the live file, then writes it: a
    memory-mapped index died with SIGBUS on the next search, with nothing in the log. The server
    reads its index into memory, so neither the truncation nor garbage written in place reaches it;
    a new generation that is damaged is logged and the one in use keeps serving. (Format 2 keeps
    a small index's vectors in a segment's .npy, the same case.)"""
    from helpers import kb_serve

    index, gen = copy_index(seeds_index, tmp_path)
    (live,) = (index / gen).glob("seg-*.npy")  # format 2: the vectors of a small index, one segment
    size = live.stat().st_size
    with kb_serve(index, tmp_path / "serve.log") as server:
        status, body = _search(server.base, HCCL_LINE)
        assert status == 200 and HCCL_LINE in body["hits"][0]["title"]
        with open(live, "r+b") as fh:
            fh.truncate(0)  # what cp does first
        for _ in range(3):
            status, body = _search(server.base, HCCL_LINE)
            assert status == 200 and HCCL_LINE in body["hits"][0]["title"]
        with open(live, "r+b") as fh:
            fh.write(os.urandom(size))  # and then other bytes in place
        status, body = _search(server.base, HCCL_LINE)
        assert status == 200 and HCCL_LINE in body["hits"][0]["title"]

        # A new generation whose vectors are damaged is named by the manifest: logged, not served.
        broken = "gen-20990101-000000-1-badbad"
        shutil.copytree(index / gen, index / broken)
        m = manifest(index)
        (index / "manifest.json").write_text(json.dumps({**m, "generation": broken}))
        deadline = time.monotonic() + 30
        while "could not load the rebuilt index" not in server.log.read_text():
            assert time.monotonic() < deadline, server.log.read_text()
            _search(server.base, "NCCL error")  # a request starts the reload check
            time.sleep(0.3)
        status, body = _search(server.base, HCCL_LINE)
        assert status == 200 and HCCL_LINE in body["hits"][0]["title"]
        assert server.proc.poll() is None
    assert "Fatal" not in server.log.read_text() and "SIGBUS" not in server.log.read_text()
