"""Choosing the store (index/backends.py, the `[store]` settings) and the parts of the Milvus store
that need no Milvus: how tokens are encoded for its analyzer, how blobs are chunked."""

from __future__ import annotations

import re

import pytest

from index.backends import StoreOptions, has_index, label
from index.milvus_store import CHUNK, MilvusOptions, encode, pack, unpack
from index.store import IndexError_
from kb.config import load_settings
from kb.errors import ConfigError


def test_store_settings_from_the_file_and_the_environment(tmp_path, monkeypatch):
    cfg = tmp_path / "kb.toml"
    cfg.write_text('[store]\nbackend = "milvus"\nuri = "http://10.0.0.5:19530"\n', "utf-8")
    monkeypatch.setenv("KB_CONFIG", str(cfg))
    s = load_settings()
    assert (s.store.backend, s.store.uri, s.store.name) == ("milvus", "http://10.0.0.5:19530", "kb")
    monkeypatch.setenv("KB_STORE_URI", "./other.db")
    monkeypatch.setenv("KB_STORE_NAME", "team_a")
    s = load_settings()
    assert (s.store.uri, s.store.name) == ("./other.db", "team_a")


def test_a_store_that_does_not_exist_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv("KB_STORE_BACKEND", "elastic")
    with pytest.raises(ConfigError, match="KB_STORE_BACKEND must be faiss or milvus, not 'elastic'"):
        load_settings()


def test_the_token_comes_from_the_environment_only(tmp_path, monkeypatch):
    from kb.indexing import store_options

    monkeypatch.setenv("KB_STORE_TOKEN", "root:Milvus")
    options = store_options(load_settings())
    assert options.token == "root:Milvus" and "Milvus" not in label(options, tmp_path)


def test_faiss_stays_the_default(tmp_path):
    assert not load_settings().store.backend == "milvus"
    assert not StoreOptions().milvus and not has_index(StoreOptions(), tmp_path)


def test_tokens_reach_any_analyzer_whole():
    """Milvus' `standard` analyzer splits on anything but letters and digits and lower-cases:
    every encoded token must be one such word, and distinct tokens stay distinct."""
    tokens = [
        "nccl",
        "1343225860",
        "NCCL_SOCKET_IFNAME",
        "nccl_socket_ifname",
        "libhccl.so",
        "免密登录",
        "a" * 40,
    ]
    encoded = [encode(t) for t in tokens]
    assert all(re.fullmatch(r"[a-z0-9]+", e) for e in encoded)
    assert len(set(encoded)) == len(tokens)
    assert encoded[:2] == ["nccl", "1343225860"]  # plain words stay readable


def test_blobs_survive_chunking():
    import hashlib

    noise = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3000)]  # does not compress
    big = {"entries": [{"id": f"doc:{i}", "title": "标题 " + noise[i] * 2} for i in range(3000)]}
    parts = pack(big)
    assert len(parts) > 1 and all(len(p) <= CHUNK for p in parts)
    assert unpack(parts) == big


def test_an_index_name_milvus_cannot_take_is_refused():
    with pytest.raises(IndexError_, match="letters, digits and _"):
        MilvusOptions("./kb.db", name="team-a; drop")
    assert MilvusOptions("./kb.db").lite and not MilvusOptions("http://h:19530").lite
