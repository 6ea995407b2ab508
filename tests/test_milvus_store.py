"""The Milvus store (index/milvus_store.py, index/milvus_build.py) on Milvus Lite, in process:
build, search (the same ranking as FAISS over the same rows), re-ingest, delete, the atomic
switch, a refused second process, a refused embedder, one builder at a time, and the core's
settings choosing it. The fake embedder stands in for a model (the Embedder seam)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
from fakes import FakeEmbedder

pytest.importorskip("pymilvus")

from index import milvus_build  # noqa: E402
from index.build import build as build_files  # noqa: E402
from index.milvus_store import MilvusOptions, connect, live_collection, load  # noqa: E402
from index.search import Searcher  # noqa: E402
from index.store import IndexError_  # noqa: E402
from index.store import load as load_files  # noqa: E402

pytestmark = pytest.mark.slow  # each Milvus Lite build takes seconds

QUERIES = [
    "Init plugin so failed, ret = 1343225860",
    "ExternalError: Nccl error(2), unhandled system error",
    "NCCL_SOCKET_IFNAME 怎么设置",
    "how do I set up passwordless ssh between nodes",
]


@pytest.fixture(scope="module")
def bundled_entries():
    from ingest.collect import collect
    from kb.indexing import bundled_docs

    return collect([str(bundled_docs())]).entries


@pytest.fixture
def options(tmp_path):
    return MilvusOptions(str(tmp_path / "kb.db"), name="kbtest")


def _ids(searcher, query):
    r = searcher.search(query)
    return [h.entry.id for h in (r.hits or r.suggestions)][:3], r.no_match


def test_build_and_search_rank_as_the_faiss_store_does(tmp_path, options, bundled_entries):
    emb = FakeEmbedder()
    stats = milvus_build.build(options, bundled_entries, emb, ["bundled"])
    assert stats.entries == len(bundled_entries) and stats.embedded > 0 and stats.reused == 0
    build_files(tmp_path / "faiss", bundled_entries, emb, ["bundled"])
    milvus, faiss = load(options, emb.id), load_files(tmp_path / "faiss", emb.id)
    assert [e.id for e in milvus.entries] == [e.id for e in faiss.entries]
    assert milvus.vectors.size == faiss.vectors.size
    a, b = Searcher(milvus, emb), Searcher(faiss, emb)
    same_top = 0
    for q in QUERIES:
        (top_m, none_m), (top_f, none_f) = _ids(a, q), _ids(b, q)
        same_top += top_m[:1] == top_f[:1] and none_m == none_f
    assert same_top == len(QUERIES)
    # The nearest rows are the same rows, with the same cosines.
    q = emb.embed_queries(QUERIES)
    hm, hf = milvus.vectors.search(q, 10), faiss.vectors.search(q, 10)
    assert (abs(hm.scores - hf.scores) < 1e-4).all()
    # Tokens that a text analyzer would split or drop reach BM25 whole.
    for token in ("nccl_socket_ifname", "hccl_connect_timeout", "libhccl.so"):
        if token in faiss.lexical:
            m, f = milvus.lexical.scores([token])[0], faiss.lexical.scores([token])[0]
            assert ((m > 0) == (f > 0)).all() and (f > 0).any()


def test_reingest_embeds_only_what_changed_and_deletes_what_went(options, bundled_entries):
    emb = FakeEmbedder()
    first = milvus_build.build(options, bundled_entries, emb, ["bundled"])
    changed = list(bundled_entries)
    changed[0] = replace(changed[0], title="Completely new title about zebra crossings")
    gone = changed.pop()
    emb.documents.clear()
    second = milvus_build.build(options, changed, emb, ["bundled"])
    assert 1 <= second.embedded <= 3 < first.embedded
    assert all("zebra" in t for t in emb.documents[:1])
    loaded = load(options, emb.id)
    assert gone.id not in {e.id for e in loaded.entries}
    assert loaded.entries[0].title.endswith("zebra crossings")
    hits = loaded.vectors.search(emb.embed_queries(["zebra crossings"]), 5)
    assert int(hits.entries[0, 0]) == 0
    assert int(hits.entries.max()) < len(changed)


def test_rebuild_switches_all_at_once_and_the_old_generation_keeps_answering(
    options, bundled_entries, monkeypatch
):
    emb = FakeEmbedder()
    milvus_build.build(options, bundled_entries[:40], emb, ["bundled"])
    before = load(options, emb.id)
    seen = {}
    real_switch = milvus_build.switch

    def switch(client, name, generation):
        # Everything of the new generation is written, and readers still get the old one whole.
        during = load(options, emb.id)
        seen["during"] = (during.manifest["generation"], len(during.entries))
        real_switch(client, name, generation)

    monkeypatch.setattr(milvus_build, "switch", switch)
    milvus_build.build(options, bundled_entries, emb, ["bundled"])
    after = load(options, emb.id)
    assert seen["during"] == (before.manifest["generation"], 40)
    assert after.manifest["generation"] != before.manifest["generation"]
    assert len(after.entries) == len(bundled_entries)
    # A reader holding the previous generation still searches it (it is kept until the next build).
    assert Searcher(before, emb).search(QUERIES[0]).hits


def test_mismatched_embedder_is_refused(options, bundled_entries):
    milvus_build.build(options, bundled_entries[:10], FakeEmbedder(), ["bundled"])
    with pytest.raises(IndexError_, match="built with embedder 'fake/words-64' but 'other/model'"):
        load(options, "other/model")


def test_no_index_yet_says_what_to_run(options):
    with pytest.raises(IndexError_, match="no index at milvus:.*kb ingest"):
        load(options, None)


def test_a_second_process_on_a_lite_folder_is_refused(tmp_path):
    folder = tmp_path / "held.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                from pymilvus import MilvusClient
                MilvusClient({str(folder)!r}); print("ready", flush=True); time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(IndexError_, match="open in another process: Milvus Lite allows one process"):
            connect(MilvusOptions(str(folder)))
    finally:
        holder.kill()
        holder.wait()


def test_two_builders_run_one_after_the_other(options):
    with milvus_build.builder_lock(options):
        with pytest.raises(IndexError_, match="another `kb ingest` is building"):
            with milvus_build.builder_lock(options, wait=False):
                pass


def test_old_generations_are_dropped_the_previous_one_kept(options, bundled_entries):
    emb = FakeEmbedder()
    for n in (10, 11, 12):
        milvus_build.build(options, bundled_entries[:n], emb, ["bundled"])
    client = connect(options)
    generations = {c.rsplit("_", 1)[0] for c in client.list_collections() if c.startswith("kbtest_g")}
    assert len(generations) == 2
    assert live_collection(client, "kbtest").removesuffix("_meta") == max(generations)


def test_the_settings_choose_the_milvus_store(tmp_path, monkeypatch):
    from kb.config import load_settings
    from kb.indexing import bundled_docs, ingest
    from kb.service import KnowledgeBase

    monkeypatch.setenv("KB_STORE_BACKEND", "milvus")
    monkeypatch.setenv("KB_STORE_URI", str(tmp_path / "settings.db"))
    monkeypatch.setenv("KB_STORE_NAME", "viasettings")
    settings = load_settings()
    assert (settings.store.backend, settings.store.name) == ("milvus", "viasettings")
    emb = FakeEmbedder()
    outcome = ingest([str(bundled_docs())], tmp_path / "unused", settings, embedder=emb)
    assert outcome.index.startswith("milvus:") and not (tmp_path / "unused").exists()
    kb = KnowledgeBase(settings, tmp_path / "unused", embedder=emb)
    assert kb.index.vectors.kind == "milvus-flat"
    assert kb.search(QUERIES[1]).hits[0].entry.title
    assert kb.reload_if_changed() is False
    ingest([str(bundled_docs())], tmp_path / "unused", settings, embedder=emb)
    assert kb.reload_if_changed() is True


def _faq(folder, title: str, answer: str) -> None:
    folder.write_text(f"# Cluster notes\n\n## Q: {title}\n\nA: {answer}\n", "utf-8")


def test_kb_ingest_with_no_paths_reingests_the_milvus_index_sources(tmp_path, monkeypatch, capsys):
    import json

    import kb.indexing
    from kb.doors.cli import main
    from kb.indexing import recorded_sources

    monkeypatch.setenv("KB_STORE_BACKEND", "milvus")
    monkeypatch.setenv("KB_STORE_URI", str(tmp_path / "cli.db"))
    monkeypatch.setenv("KB_STORE_NAME", "clitest")
    monkeypatch.setenv("KB_HOME", str(tmp_path / "home"))
    emb = FakeEmbedder()
    monkeypatch.setattr(kb.indexing, "_OnDemandEmbedder", lambda settings: emb)
    # No index yet: the error says what to type, and names the store.
    assert main(["ingest"]) == 1
    err = capsys.readouterr().err
    assert "no index at milvus:" in err and "cli.db#clitest" in err and "kb ingest docs/" in err

    docs = tmp_path / "docs"
    docs.mkdir()
    _faq(docs / "gpu.md", "Why does the GPU driver fail to load?", "Reinstall the driver package.")
    _faq(docs / "net.md", "Why is the NIC link down?", "Check the cable and the switch port.")
    _faq(docs / "disk.md", "Why is the disk full?", "Remove old checkpoints from the scratch disk.")
    assert main(["ingest", str(docs), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["entries"] == 3 and first["embedded"] > 0 and first["index"].startswith("milvus:")
    assert recorded_sources(tmp_path / "unused", kb.indexing.load_settings()) == [str(docs.resolve())]

    _faq(docs / "net.md", "Why does the zebra switch drop quux frames?", "Update the switch firmware.")
    emb.documents.clear()
    assert main(["ingest", "--json"]) == 0  # no paths: the sources recorded in the store
    second = json.loads(capsys.readouterr().out)
    assert second["entries"] == 3 and 1 <= second["embedded"] < first["embedded"]
    assert second["reused"] > 0, second
    # Only the edited entry's texts were embedded again.
    assert len(emb.documents) == second["embedded"] and all("zebra" in t for t in emb.documents)
    loaded = load(MilvusOptions(str(tmp_path / "cli.db"), name="clitest"), emb.id)
    top = Searcher(loaded, emb).search("zebra switch drops quux frames")
    assert (top.hits or top.suggestions)[0].entry.title == "Why does the zebra switch drop quux frames?"
    assert not (tmp_path / "home").exists()  # nothing was written to a FAISS folder
