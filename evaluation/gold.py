"""Gold sets: the two formats `kb eval` reads, and what counts as a right answer.

The project's own sets (eval/gold/*.jsonl), one query per line:

    {"id": "...", "query": "...", "lang": "zh|en", "kind": "log|question|...",
     "expected": [{"doc": "a/b.md", "line": 12} | {"doc": "a/b.md", "title": "..."}]}

An optional first line `{"meta": {"kb": "shared:corpus", "langs": ["en"]}}` names the knowledge
base ("shared:X" is X in the ../shared folder beside the checkout, or $KB_SHARED/X) and which of
its languages are indexed. An entry is right when a line of `expected` lies inside it or its
title is the expected one.

Real posts (../shared/eval/real_dev.jsonl, described in ../shared/eval/README.md):

    {"id": "dev-001", "text": "the post", "lang": "en|mixed|zh", "match": "exact|...|none",
     "expected": [{"kb": "seeds|corpus", "doc": "...", "start_line": 1, "end_line": 9, ...}]}

Each answerable row is searched in the index of its first expected item's knowledge base
(`kb` names a folder of the shared folder); an unanswerable row (`expected: []`) in every
knowledge base the set names, and it is turned away only when each of them says "no match". An
entry is right when it comes from a labelled document and at least half of its lines lie inside
the label's range.

`expected: []` means nothing answers the query and the right output is no_match. A linked FAQ
counts as found when either language version is shown, except for rows with a `translation`
item, which check that the *shown* entry is the query's own-language one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from index.labels import Expected, entry_matches, norm_title, parse_expected
from kb.errors import KbError

__all__ = ["Expected", "GoldRow", "GoldSet", "entry_matches", "load_gold", "norm_title"]


@dataclass(frozen=True)
class GoldRow:
    id: str
    query: str
    lang: str
    kind: str
    expected: tuple[Expected, ...]
    # Own-language-first rows: the other-language entries one of which must be linked beside it.
    translation: tuple[Expected, ...] = ()
    direction: str | None = None  # e.g. "zh->en"; derived from the expected entry when absent
    kb: str | None = None  # the knowledge base the row is searched in; None: the set's (or all of them)
    # False: an unanswerable row nobody checked (kb/unanswered.py: an unvoted "no match"), no gap
    # (evaluation/precedents.py, as kb/precedents.py leaves it out of an index's precedents).
    checked: bool = True

    @property
    def answerable(self) -> bool:
        return bool(self.expected)


@dataclass
class GoldSet:
    name: str
    path: Path
    rows: list[GoldRow]
    kb: Path | None = None  # the KB root the set is about (from its meta line)
    langs: tuple[str, ...] | None = None  # languages of that KB to index (None: all)
    kbs: dict[str, Path] | None = None  # real-post sets: knowledge-base name -> its root

    @property
    def per_row_kb(self) -> bool:
        return bool(self.kbs)


def shared_dir(start: Path, setting: str = "") -> Path | None:
    """The `shared` setting (KB_SHARED), else the `shared` folder beside the checkout (found
    walking up from start)."""
    if setting:
        return Path(setting)
    for parent in [start, *start.parents]:
        if (parent / "shared").is_dir() and parent != start:
            return parent / "shared"
    return None


def load_gold(path: str | Path, shared: str = "") -> GoldSet:
    """shared: the `shared` setting, where \"shared:X\" knowledge bases live."""
    path = Path(path)
    try:
        lines = path.read_text("utf-8-sig").splitlines()  # a Windows editor's byte-order mark too
    except OSError as e:
        raise KbError(f"cannot read gold set {path}: {e}") from e
    gold = GoldSet(name=path.stem, path=path, rows=[])
    seen: set[str] = set()
    kb_names: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise KbError(f"{where}: not JSON ({e})") from e
        if "meta" in obj:
            _apply_meta(gold, obj["meta"], path, shared)
            continue
        query = obj.get("query", obj.get("text"))
        missing = [
            k
            for k, v in (("id", obj.get("id")), ("query", query), ("expected", obj.get("expected")))
            if v is None
        ]
        if missing:
            raise KbError(f"{where}: missing {', '.join(missing)}")
        if obj["id"] in seen:
            raise KbError(f"{where}: duplicate id {obj['id']!r}")
        seen.add(obj["id"])
        expected = tuple(parse_expected(x, where) for x in obj["expected"])
        kbs = [x.kb for x in expected if x.kb]
        kb_names.update(kbs)
        gold.rows.append(
            GoldRow(
                id=str(obj["id"]),
                query=query,
                lang=obj.get("lang") or "",
                kind=obj.get("kind") or obj.get("match") or "query",
                expected=expected,
                translation=tuple(parse_expected(x, where) for x in _as_list(obj.get("translation"))),
                direction=obj.get("direction"),
                kb=kbs[0] if kbs else None,
                checked=obj.get("checked", True) is not False,
            )
        )
    if not gold.rows:
        raise KbError(f"gold set {path} has no queries")
    if kb_names:
        gold.kbs = {name: _resolve_kb(f"shared:{name}", path, shared) for name in sorted(kb_names)}
    return gold


def _apply_meta(gold: GoldSet, meta: dict, path: Path, shared: str) -> None:
    if meta.get("kb"):
        gold.kb = _resolve_kb(meta["kb"], path, shared)
    if meta.get("langs"):
        gold.langs = tuple(meta["langs"])
    if meta.get("name"):
        gold.name = meta["name"]


def _as_list(value) -> list:
    if not value:
        return []
    return value if isinstance(value, list) else [value]


def _resolve_kb(value: str, gold_path: Path, setting: str = "") -> Path:
    if value.startswith("shared:"):
        shared = shared_dir(gold_path.resolve().parent, setting)
        if shared is None:
            name = value.removeprefix("shared:")
            raise KbError(
                f'{gold_path}: names the knowledge base "{name}" (its "kb"), a folder of the shared data '
                "(../shared beside the checkout, or KB_SHARED), which is not there; set KB_SHARED "
                'to the folder that holds it, or leave "kb" out of the rows and give the index with --index'
            )
        return shared / value.removeprefix("shared:")
    p = Path(value)
    return p if p.is_absolute() else (gold_path.parent / p).resolve()
