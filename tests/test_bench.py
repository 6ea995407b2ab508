"""The speed benchmark's harness (eval/bench.py) at a tiny size, and the speed work it checks:
the report's structure and sanity, never its speed (that is the benchmark's job)."""

import importlib.util
import json
import os

import pytest
from conftest import ROOT, needs_shared


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "eval" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
import bench_corpus as corpus  # noqa: E402 - eval/ is on sys.path once bench.py is loaded


@needs_shared
def test_variants_change_text_but_not_how_a_file_parses():
    from ingest.collect import entries_from_text

    docs = corpus.base_documents()
    assert len(docs) > 100 and all(d["doc"] != "MANIFEST.md" for d in docs)
    varied = 0
    for d in docs[:40]:
        original = entries_from_text(d["doc"], d["text"])
        text = corpus.vary_text(d["text"], 3, d["lang"], set(d["title_lines"]))
        copy = entries_from_text(d["doc"], text)
        if len(copy) != len(original):  # make_corpus falls back to the mild variant then
            text = corpus.vary_text(d["text"], 3, d["lang"], set(d["title_lines"]), full=False)
            copy = entries_from_text(d["doc"], text)
        assert len(copy) == len(original), d["doc"]
        assert text != d["text"]
        # Every title gets its own text, so the copy's title rows are embedded, not reused.
        assert not {e.title for e in copy} & {e.title for e in original}, d["doc"]
        varied += sum(a.body != b.body for a, b in zip(original, copy, strict=True))
    assert varied > 20  # bodies with numbers, interface names or several sentences


def test_replicated_entries_are_new_entries_with_their_own_texts():
    from dataclasses import replace

    from fakes import entry

    base = [
        replace(entry("a/en/x.md", 1, 5, "Port 8080 in use"), body="Run `kill 4242` then retry on 10.0.0.1."),
        replace(
            entry("a/zh/x.md", 1, 5, "端口被占用", lang="zh"),
            body="等待 30 秒后重试。",
            translation="a/en/x.md:1",
        ),
        replace(entry("a/en/y.md", 7, 9, "No numbers here"), body="Reinstall the driver."),
    ]
    out = corpus.replicated_entries(base, 8)
    assert len(out) == 8 and out[:3] == base
    assert len({e.id for e in out}) == 8 and len({e.title for e in out}) == 8
    copy = out[3]
    assert (
        copy.doc == "x01/a/en/x.md" and copy.title.startswith("Port 8087 in use") and "copy 1" in copy.title
    )
    assert (
        copy.body == "Run `kill 4249` then retry on 17.7.7.8." and copy.content_hash != base[0].content_hash
    )
    assert out[4].title.endswith("副本 1）") and out[4].translation is None
    assert [e.doc for e in out[6:]] == ["x02/a/en/x.md", "x02/a/zh/x.md"]  # cut at the size asked
    assert corpus.replicated_entries(base, 2) == base[:2]


def test_logs_have_200_lines_and_end_in_the_error():
    log = corpus.make_log(0, 1, ["RuntimeError: Device 8 call rtSetDevice failed, ret[107001]."])
    lines = log.split("\n")
    assert len(lines) == 200 and "rtSetDevice failed" in lines[-2]
    assert corpus.make_log(0, 2, ["x"]) != corpus.make_log(0, 1, ["x"])  # runs vary the numbers


@pytest.mark.slow
@needs_shared
def test_tiny_benchmark_report(tmp_path, bundled_kb):
    out = tmp_path / "out"
    argv = ["--sizes", "60", "--runs", "1", "--cold-runs", "1", "--out", str(out)]
    argv += ["--cache", str(tmp_path / "cache"), "--kb-home", os.environ["KB_HOME"]]
    assert bench.main(argv) == 0

    report = json.loads((out / "bench.json").read_text())
    (size,) = report["sizes"]
    ingest = size["ingest"]
    assert 60 <= ingest["entries"] == size["corpus"]["entries"] < 200
    assert ingest["rows"] > ingest["entries"] and ingest["index_kind"] == "flat"
    assert ingest["embedded"] > 0 and ingest["disk_mb"] > 0 and ingest["peak_rss_mb"] > 50
    assert 0 < ingest["stages"]["embed"] < ingest["seconds"]

    search = size["search"]
    assert search["entries"] == ingest["entries"]
    for kind, n in (("short", len(bench.SHORT_QUERIES)), ("log", 6)):
        s = search[kind]
        assert s["n"] == n and 0 < s["median_ms"] <= s["p95_ms"]
        parts = s["breakdown_median_ms"]
        assert set(parts) == {"clean", "embed", "faiss", "bm25", "features", "fusion"}
        assert all(v >= 0 for v in parts.values()) and parts["embed"] > 0
        assert sum(parts.values()) <= 3 * s["p95_ms"]
    assert "recall" not in search  # exact index: nothing to compare

    reingest = size["reingest"]
    edit, revert = reingest["embedded"]
    # The edit embeds one entry's changed texts, not the corpus; the revert's texts may still be
    # in the previous generation (a dead row of its base segment, index/segments.py).
    assert 1 <= edit <= 3 and 0 <= revert <= 3
    lc = size["langchain"]
    assert lc["ingest"]["chunks"] > 0 and lc["search"]["vectors"] == lc["ingest"]["chunks"]
    assert lc["search"]["short"]["n"] == len(bench.SHORT_QUERIES)
    cold = report["cold"]
    assert (
        cold["runs"] == 1
        and cold["median_seconds"] > 0
        and set(cold["phases_median"]) >= {"model", "open_index"}
    )

    md = (out / "bench.md").read_text()
    for heading in (
        "## Targets",
        "## Ingest",
        "## Warm search",
        "## Re-ingest",
        "## Cold start",
        "## Side by side",
        "## Corpora",
    ):
        assert heading in md
    assert f"| {ingest['entries']:,} |" in md
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
