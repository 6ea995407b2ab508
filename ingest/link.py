"""Pair entries that are the same FAQ in the other language (zh <-> en).

Two sources of evidence:
- document pairs: declared in a `pairs*.tsv` beside the documents (`zh_doc<TAB>en_doc`) or implied by
  the path (`zh/x.md` <-> `en/x.md`, `x_cn.md` <-> `x_en.md`). Within a pair, entries are aligned in
  order when both sides have the same number of entries, else by similarity;
- content, for everything else: the question titles' cross-lingual similarity (supplied by the
  caller, usually from the embedder) plus shared identifiers and error strings. Only mutual best
  matches above a threshold are linked, so a zh-only page does not get a wrong partner.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from .entry import Entry

Similarity = Callable[[Sequence[str], Sequence[str]], np.ndarray]  # (zh titles, en titles) -> matrix

# Content links need a title similarity at least this high and must be each other's best match.
MIN_TITLE_SIMILARITY = 0.62
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[A-Z0-9_][A-Za-z0-9_.]*|\d{3,}")
_PATH_SWAPS = (("/zh/", "/en/"), ("zh_cn", "en"), ("_cn.", "_en."), ("_zh.", "_en."), ("zh/", "en/"))


def read_declared_pairs(roots: Iterable[Path]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for root in roots:
        if not root.is_dir():
            continue
        for tsv in sorted(root.glob("pairs*.tsv")):
            for line in tsv.read_text("utf-8", errors="replace").splitlines():
                cols = line.strip().split("\t")
                if len(cols) >= 2 and cols[0] and not cols[0].startswith("#"):
                    pairs.append((cols[0].strip(), cols[1].strip()))
    return pairs


def _implied_partner(doc: str) -> str | None:
    for zh, en in _PATH_SWAPS:
        if zh in doc:
            return doc.replace(zh, en, 1)
    return None


def _doc_pairs(docs, declared_pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """(zh doc, en doc) pairs among `docs`: declared, or implied by the path."""
    pairs = {(zh, en) for zh, en in declared_pairs if zh in docs and en in docs}
    for doc in docs:
        partner = _implied_partner(doc)
        if partner and partner in docs:
            pairs.add((doc, partner))
    return pairs


def link_groups(docs: Iterable[str], declared_pairs: Iterable[tuple[str, str]] = ()) -> list[list[str]]:
    """Docs whose entries link_translations links only among themselves: each set of paired
    documents (a pair, or pairs sharing a document), and all unpaired documents together
    (their entries are matched by content). Linking a group alone gives the links that linking
    everything gives to its entries, so a rebuild links again only the groups that changed."""
    docs = list(dict.fromkeys(docs))
    present = set(docs)
    parent = {d: d for d in docs}

    def root(d: str) -> str:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for zh, en in sorted(_doc_pairs(present, declared_pairs)):
        parent[root(zh)] = root(en)
    paired = {d for pair in _doc_pairs(present, declared_pairs) for d in pair}
    groups: dict[str, list[str]] = defaultdict(list)
    for d in docs:
        groups[root(d) if d in paired else ""].append(d)
    return [g for key, g in groups.items() if key] + ([groups[""]] if "" in groups else [])


def _identifiers(entry: Entry) -> set[str]:
    text = " ".join((entry.title, *entry.signatures, *entry.commands))
    return {m.lower() for m in _IDENT.findall(text)}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def link_translations(
    entries: list[Entry],
    declared_pairs: Iterable[tuple[str, str]] = (),
    similarity: Similarity | None = None,
) -> list[Entry]:
    by_doc: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_doc[e.doc].append(e)
    links: dict[str, str] = {}

    doc_pairs = _doc_pairs(by_doc, declared_pairs)
    paired_docs = {d for pair in doc_pairs for d in pair}

    for zh_doc, en_doc in sorted(doc_pairs):
        zh, en = by_doc[zh_doc], by_doc[en_doc]
        if len(zh) == len(en):
            for a, b in zip(zh, en, strict=True):
                links[a.id], links[b.id] = b.id, a.id
        else:
            _match(zh, en, similarity, links, threshold=MIN_TITLE_SIMILARITY - 0.1)

    rest_zh = [e for e in entries if e.lang == "zh" and e.doc not in paired_docs and e.id not in links]
    rest_en = [e for e in entries if e.lang == "en" and e.doc not in paired_docs and e.id not in links]
    if rest_zh and rest_en and similarity is not None:
        _match(rest_zh, rest_en, similarity, links, threshold=MIN_TITLE_SIMILARITY)

    return [replace(e, translation=links.get(e.id)) for e in entries]


def _match(
    zh: list[Entry],
    en: list[Entry],
    similarity: Similarity | None,
    links: dict[str, str],
    threshold: float,
) -> None:
    """Mutual-best matching on title similarity, nudged by shared identifiers."""
    if not zh or not en:
        return
    ids_zh = [_identifiers(e) for e in zh]
    ids_en = [_identifiers(e) for e in en]
    overlap = np.array([[_jaccard(a, b) for b in ids_en] for a in ids_zh], dtype=np.float32)
    if similarity is None:
        score, title = overlap, overlap
        threshold = 0.5
    else:
        title = np.asarray(similarity([e.title for e in zh], [e.title for e in en]), dtype=np.float32)
        score = title + 0.3 * overlap
    best_en = score.argmax(axis=1)
    best_zh = score.argmax(axis=0)
    for i, j in enumerate(best_en):
        if best_zh[j] == i and title[i, j] + 0.3 * overlap[i, j] >= threshold:
            if zh[i].id not in links and en[j].id not in links:
                links[zh[i].id], links[en[j].id] = en[j].id, zh[i].id
