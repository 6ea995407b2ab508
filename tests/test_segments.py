"""index/build.py VectorSource and index/segments.py write_segment: what a build embeds goes to a
temporary file a chunk at a time, and a segment is written and indexed a chunk at a time, so a
big build never holds its vectors twice. Chunked or not, the index must be the same."""

import json

import numpy as np
import pytest
from fakes import FakeEmbedder

from index import build as build_module
from index import segments
from index.build import VectorSource, build, text_key
from index.milvus_build import ChunkedVectors
from index.store import load
from ingest.entry import Entry


def _entries(n: int) -> list[Entry]:
    words = "nccl hccl timeout socket rank gloo ascend device memory port".split()
    out = []
    for i in range(n):
        title = f"{words[i % 10]} {words[(i * 3) % 10]} error {i}"
        body = f"{words[(i * 7) % 10]} fails on node {i}; set {words[i % 10].upper()}_DEBUG=INFO"
        out.append(
            Entry(f"doc{i // 10}.md:{i}", str(i), f"doc{i // 10}.md", "en", title, (title,), body, i, i)
        )
    return out


def _generation(directory):
    manifest = json.loads((directory / "manifest.json").read_text())
    gen = directory / manifest["generation"]
    meta = json.loads((gen / "vectors.json").read_text())["segments"]
    vectors = np.concatenate([np.load(gen / f"{s['name']}.npy") for s in meta])
    rows = np.load(gen / "rows.npz")
    return [s["kind"] for s in meta], vectors, rows["entry"], rows["key"]


def test_a_build_in_small_chunks_writes_the_same_index(tmp_path, monkeypatch):
    entries = _entries(120)
    for kind in ("flat", "ivf"):
        options = build_module.VectorOptions(kind=kind)
        build(tmp_path / f"whole-{kind}", entries, FakeEmbedder(), ["docs"], vector_options=options)
        with monkeypatch.context() as mp:
            mp.setattr(build_module, "EMBED_CHUNK", 7)  # embedded 7 texts at a time, spilled to a file
            mp.setattr(segments, "WRITE_CHUNK", 5)  # written and indexed 5 rows at a time
            build(tmp_path / f"chunked-{kind}", entries, FakeEmbedder(), ["docs"], vector_options=options)
        whole, chunked = _generation(tmp_path / f"whole-{kind}"), _generation(tmp_path / f"chunked-{kind}")
        assert whole[0] == chunked[0] == [kind]
        for a, b in zip(whole[1:], chunked[1:], strict=True):
            assert np.array_equal(a, b)
        assert len(whole[1]) > 240  # several rows per entry: many chunks were written
        query = FakeEmbedder().embed_queries(["hccl timeout error 17"])
        for name in (f"whole-{kind}", f"chunked-{kind}"):
            hits = load(tmp_path / name, FakeEmbedder.id).vectors.search(query, 5)
            assert hits.entries[0][0] >= 0


def test_embedded_vectors_live_in_a_temporary_file_and_come_back_by_hash(monkeypatch):
    monkeypatch.setattr(build_module, "EMBED_CHUNK", 4)
    texts = {text_key(t).encode(): t for t in (f"text number {i}" for i in range(11))}
    keys = np.asarray(list(texts), dtype="S20")
    reported: list[tuple[int, int]] = []
    source = VectorSource(None, FakeEmbedder())
    todo = source.embed_missing(keys, dict(texts), lambda _stage, d, n: reported.append((d, n)))
    assert sorted(todo) == sorted(texts) and source.dim == FakeEmbedder.dim
    assert reported[-1] == (11, 11) and len(reported) >= 3  # progress over the whole, not per chunk
    assert isinstance(source._embedded, np.memmap) and not source._embedded.flags.writeable
    shuffled = keys[::-1].copy()
    expected = FakeEmbedder().embed_documents([texts[bytes(k)] for k in shuffled])
    assert np.allclose(source(shuffled), expected, atol=1e-6)
    with pytest.raises(KeyError, match="neither embedded"):  # an unknown text hash gets no vector
        source(np.asarray([b"0" * 20], dtype="S20"))


class Counting:
    """A VectorSource that counts the rows asked of it per call."""

    def __init__(self, source: VectorSource) -> None:
        self.source, self.dim, self.calls = source, source.dim, list[int]()

    def __call__(self, keys):
        self.calls.append(len(keys))
        return self.source(keys)


def test_milvus_rows_read_their_vectors_a_chunk_at_a_time(monkeypatch):
    import index.milvus_build as milvus_build

    monkeypatch.setattr(milvus_build, "CHUNK_ROWS", 3)
    texts = {text_key(t).encode(): t for t in (f"row text {i}" for i in range(10))}
    keys = np.asarray(list(texts), dtype="S20")
    source = VectorSource(None, FakeEmbedder())
    source.embed_missing(keys, dict(texts), None)
    counted = Counting(source)
    rows = ChunkedVectors(counted, keys)  # type: ignore[arg-type]
    assert rows.shape == (10, FakeEmbedder.dim)
    got = np.stack([rows[r] for r in range(10)])
    assert np.allclose(got, source(keys)) and counted.calls == [3, 3, 3, 1]
