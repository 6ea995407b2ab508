"""The Entry record: one question or problem from one document."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace


def _digest(*parts: str) -> str:
    h = hashlib.sha1()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Section:
    """What the parser finds: an entry before signals, language and ids are attached.

    `body` is the entry's markdown without its title line(s), code fences intact,
    with the indentation of a list item removed. Lines are 1-based and inclusive.
    """

    title: str
    heading_path: tuple[str, ...]
    body: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Entry:
    id: str
    content_hash: str
    doc: str
    lang: str
    title: str
    heading_path: tuple[str, ...]
    body: str
    start_line: int
    end_line: int
    signatures: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    translation: str | None = None

    @staticmethod
    def make_id(doc: str, heading_path: tuple[str, ...], title: str) -> str:
        # Stable across body edits: only where the entry lives and what it is called.
        return _digest(doc, *heading_path, title)

    @staticmethod
    def hash_body(title: str, body: str) -> str:
        return _digest(title, body)

    @property
    def location(self) -> str:
        """`doc:start-end`, the label every door and the LLM prompt give an entry's lines."""
        return f"{self.doc}:{self.start_line}-{self.end_line}"

    def with_translation(self, other_id: str | None) -> Entry:
        return replace(self, translation=other_id)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "content_hash": self.content_hash,
            "doc": self.doc,
            "lang": self.lang,
            "title": self.title,
            "heading_path": list(self.heading_path),
            "body": self.body,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "signatures": list(self.signatures),
            "commands": list(self.commands),
            "translation": self.translation,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Entry:
        return cls(
            id=d["id"],
            content_hash=d["content_hash"],
            doc=d["doc"],
            lang=d["lang"],
            title=d["title"],
            heading_path=tuple(d["heading_path"]),
            body=d["body"],
            start_line=int(d["start_line"]),
            end_line=int(d["end_line"]),
            signatures=tuple(d.get("signatures", ())),
            commands=tuple(d.get("commands", ())),
            translation=d.get("translation"),
        )
