"""One-document knowledge bases: what a team's own small FAQ looks like to the no-match gate.

A team starts with a FAQ of a few entries, not the shared corpus. The gate's evidence is partly
relative to the candidates (the top answer's lead, the softmax mass it holds, ranks), and in an
index of a few entries everything the post is not about is far behind, so an unrelated post's
nearest entry looks certain. Measured before this set existed, every real post searched in an
index of each seed document alone: 171 of the 604 posts that document does not answer were
shown a match with its commands (120 of 135 in the one-entry document).

So every real post is also searched in an index of each document alone: every seed document and
every corpus document a label names, when it holds fewer than SMALL_INDEX questions (34 of 38;
19 of them one question). The gate of a small index (index/ranker.py RankModel.small) is fitted
on those searches (and a team's own small index), so what the gate says of a large index does
not move; the ranking model does not learn from them (a ranking within one document is not
what it is for).
Cross-validation keeps them in their post's fold and reports them held out, apart from the
shared posts (5 folds x 3; `balance` below). In the 34 documents, 184 searches whose document
answers the post and 4,542 whose document does not:

| | right entry shown as a match | wrong one as a match | posts it does not answer shown a match |
|---|---|---|---|
| the gate alone | 0.476 | 0.082 | 0.277 |
| balanced (kept) | 0.458 | 0.076 | 0.072 |

Weighed alike (on all 38 documents, before the four large ones were left out), the 4% of
searches a document answers taught the gate that almost nothing is answered: half the right
answers lost their commands (0.438 -> 0.230, the others 0.259 -> 0.029).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from kb.config import Settings

from .gold import GoldSet
from .indexes import cache_root, cached_index, locked

SET_NAME = "real_dev_docs"


def documents(dev: GoldSet) -> list[tuple[str, Path, str]]:
    """(knowledge base, its root, document path) of each one-document index: every document of
    a knowledge base of at most 20 documents (the seeds), and every labelled one of the others."""
    labelled = {(x.kb, x.doc) for r in dev.rows for x in r.expected if x.kb}
    out = []
    for kb, root in sorted((dev.kbs or {}).items()):
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        docs = [f for f in files if (kb, f) in labelled]
        if len(files) <= 20:
            docs = [f for f in files if not f.endswith("MANIFEST.md")]
        out += [(kb, root, doc) for doc in docs]
    return out


def one_document_root(settings: Settings, kb: str, root: Path, doc: str) -> Path:
    """A folder holding only `doc`, at its path in `root` (so labels name its entries), kept in
    the eval cache and rewritten only when the document changes (call it under the document's lock, as `searchers` does)."""
    folder = cache_root(settings) / "one-document" / _slug(kb, root, doc)
    source, copy = root / doc, folder / doc
    if not copy.exists() or copy.read_bytes() != source.read_bytes():
        shutil.rmtree(folder, ignore_errors=True)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
    return folder


def _slug(kb: str, root: Path, doc: str) -> str:
    return f"{kb}-" + hashlib.sha1(f"{root.resolve()}|{doc}".encode()).hexdigest()[:12]


def searchers(dev: GoldSet, settings: Settings, embedder, progress=None) -> dict[str, object]:
    """'kb:doc' -> a Searcher over an index of that document alone (built once, then cached),
    for the documents that make a small index: a document of SMALL_INDEX questions or more is
    a large index, whose gate is the other one."""
    from index.embed import embedder_id
    from index.search import Searcher
    from index.store import load

    out = {}
    docs = documents(dev)
    for n, (kb, root, doc) in enumerate(docs, 1):
        # One session at a time copies a document and indexes it (another would delete the
        # folder it reads).
        with locked(cache_root(settings) / "one-document" / f"{_slug(kb, root, doc)}.lock"):
            directory = cached_index(one_document_root(settings, kb, root, doc), settings)
        searcher = Searcher(load(directory, embedder_id(settings.embedder)), embedder)
        if searcher.smallness > 0:
            out[f"{kb}:{doc}"] = searcher
        if progress:
            progress("one-document indexes", n, len(docs), doc)
    return out


def companions(dev: GoldSet, settings: Settings, embedder, progress=None) -> list:
    """Every post of `dev` searched in every one-document index, weighed by `balance`."""
    from . import crossval

    docs = searchers(dev, settings, embedder, progress)
    return balance(crossval.collect(dev, docs, progress, gate_only=SET_NAME))


def balance(companions) -> list:
    """Weigh a post's searches in documents that do not answer it as one search together: a
    team asks its own FAQ mostly about what it covers, not 37 times about something else for
    each question it answers (the simulated share of answering searches is 4%)."""
    others: dict[str, int] = {}
    for ex in companions:
        if not ex.positive.any():
            others[ex.row.id] = others.get(ex.row.id, 0) + 1
    for ex in companions:
        if not ex.positive.any():
            ex.share = 1.0 / others[ex.row.id]
    return companions


def held_out(companions, outcomes, splits: int = 1) -> dict:
    """What the one-document indexes showed (cross-validated outcomes, in the order of
    `companions`, once per split of a repeated cross-validation): of the posts a document
    answers, the share shown the right entry as a match and a wrong one as a match; of the
    others, the share shown a match (with its commands). Counts are of searches, shares their
    mean over the splits."""
    from .gold import entry_matches

    answered = right = wrong = others = others_matched = 0
    for ex, out in zip(list(companions) * splits, outcomes, strict=True):
        matched = not out.no_match and not out.weak
        if not ex.positive.any():
            others += 1
            others_matched += matched
            continue
        answered += 1
        top = out.ranking[0] if out.ranking else None
        shown = [e for e in (top.entry, top.translation) if e is not None] if top else []
        is_right = any(entry_matches(e, x) for e in shown for x in ex.row.expected)
        right += matched and is_right
        wrong += matched and not is_right
    return {
        "documents": len({ex.kb for ex in companions}),
        "answered": answered // splits,
        "others": others // splits,
        "answered_right": round(right / answered, 4) if answered else None,
        "answered_wrong": round(wrong / answered, 4) if answered else None,
        "others_matched": round(others_matched / others, 4) if others else None,
    }
