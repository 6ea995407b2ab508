"""Feedback, stored: votes on answers and the questions nothing answered, in one SQLite file
under the home folder (`<home>/feedback.sqlite3`, the `feedback` setting turns it off).

One row is one answer someone reacted to, or one that answered nothing: the question (secrets
scrubbed, long pastes cut), its language, what was shown (match strength and the entries, best
first), the vote (up / down / none yet), the comment, the entry the person named as the right
one, the index and its generation that answered, the time, which door, and the error signature
the unanswered queue groups by (kb/unanswered.py). One home serves every index a person uses, so
`kb feedback list` / `export` read only the rows of the index they are given (rows stored before
the index was recorded belong to every index). No user names, ids, tokens or addresses; mode 0600.

Which door writes what:
- every "no match", from every door that answers people (a row with no vote): the queue;
- the web chat and `kb feedback`/`POST /api/feedback`: a vote row (the chat updates its own
  "no match" row instead of adding a second one for the same answer);
- Slack: a row for every answer it shows (the buttons on the message name it); the vote updates
  it. Rows nobody voted on are dropped after KEEP_UNVOTED_DAYS, "no match" rows kept.

The rows are read by `kb feedback list` / `export`; nothing here changes how anything is ranked.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Settings, home_dir
from .errors import KbError
from .secrets import scrub

if TYPE_CHECKING:
    from index.search import Hit, SearchResult
    from ingest.entry import Entry

    from .answer import Answer

STORE_NAME = "feedback.sqlite3"
VOTES = ("up", "down")
# A longer paste keeps its head and its tail (where the error usually is); 32,000 Chinese characters
# were 93 KiB a row, 1.9 GB at MAX_ROWS (one client, 45 minutes): 8,000 are at most 24 KiB.
MAX_QUERY_CHARS = 8_000
QUERY_HEAD_CHARS = 2_000
MAX_COMMENT_CHARS = 2_000
KEEP_UNVOTED_DAYS = 30
# The store's bound, whoever writes to it (POST /api/feedback takes anonymous votes): past this
# many rows the oldest go. 800 rows of 26 KB took 29 s to write and nothing stopped the next.
MAX_ROWS = 20_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    door TEXT NOT NULL,
    query TEXT NOT NULL,
    lang TEXT NOT NULL,
    match TEXT NOT NULL,
    shown TEXT NOT NULL,
    vote TEXT,
    comment TEXT NOT NULL DEFAULT '',
    right_entry TEXT,
    generation TEXT NOT NULL,
    signature TEXT NOT NULL,
    label TEXT NOT NULL,
    index_name TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS feedback_signature ON feedback (signature);
"""
# The unanswered queue: every "no match" nobody marked as fine, and every thumbs-down.
QUEUE_WHERE = "(vote = 'down' OR (match = 'none' AND vote IS NULL))"


# -- what an answer showed --------------------------------------------------------------------
def entry_ref(e: Entry) -> dict:
    """What a vote keeps of an entry: where it is (kb/schema.py) and its language."""
    from .schema import entry_ref as where  # here: kb/schema.py imports index.search (numpy)

    return {**where(e), "lang": e.lang}


@dataclass(frozen=True)
class Shown:
    """What one answer showed: its strength (match / weak / none), its language and the entries,
    best first (the nearest ones when nothing matched)."""

    match: str
    lang: str
    entries: tuple[dict, ...]


def shown_by(answer: Answer | SearchResult) -> Shown:
    from .answer import Answer, entry_in

    lang = answer.lang if answer.lang in ("zh", "en") else "en"
    if isinstance(answer, Answer):
        entries = [entry_in(h, lang) for h in answer.suggestions] if answer.no_match else []
        entries += [c.entry for c in answer.citations]
    else:
        hits: Sequence[Hit] = answer.suggestions if answer.no_match else answer.hits
        entries = [entry_in(h, lang) for h in hits]
    return Shown(answer.strength, lang, tuple(entry_ref(e) for e in entries))


def _stored_query(query: str) -> str:
    if len(query) <= MAX_QUERY_CHARS:
        return query
    tail = MAX_QUERY_CHARS - QUERY_HEAD_CHARS
    return f"{query[:QUERY_HEAD_CHARS]}\n[… {len(query) - MAX_QUERY_CHARS} characters left out …]\n{query[-tail:]}"


# -- the store ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    id: int
    created: float
    updated: float
    door: str
    query: str
    lang: str
    match: str
    shown: list[dict]
    vote: str | None
    comment: str
    right: dict | None
    generation: str
    signature: str
    label: str
    index: str  # the index that answered: its folder, or milvus:NAME ('' in rows from before)

    @property
    def in_queue(self) -> bool:
        return self.vote == "down" or (self.match == "none" and self.vote is None)


def _row(r: sqlite3.Row) -> Row:
    return Row(
        id=r["id"],
        created=r["created"],
        updated=r["updated"],
        door=r["door"],
        query=r["query"],
        lang=r["lang"],
        match=r["match"],
        shown=json.loads(r["shown"]),
        vote=r["vote"],
        comment=r["comment"],
        right=json.loads(r["right_entry"]) if r["right_entry"] else None,
        generation=r["generation"],
        signature=r["signature"],
        label=r["label"],
        index=r["index_name"],
    )


class FeedbackStore:
    """The SQLite file, created on first use; a connection per call, so any thread (a server's
    pool) may use it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._ready = False
        self._init_lock = threading.Lock()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one call: committed (or rolled back) and closed at the end."""
        try:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))  # -wal, -shm follow it
            # IMMEDIATE: a write takes the write lock when its transaction begins, waiting up to
            # the timeout; a deferred one that read first can fail at once in WAL mode when
            # another writer committed meanwhile.
            db = sqlite3.connect(self.path, timeout=10.0, isolation_level="IMMEDIATE")
        except (OSError, sqlite3.Error) as e:
            raise KbError(f"cannot open the feedback store {self.path}: {e}") from e
        try:
            db.row_factory = sqlite3.Row
            if not self._ready:
                # One thread at a time sets the file up: eight threads on a new file failed with
                # "database is locked" in PRAGMA journal_mode=WAL (a lost row, on a loaded machine).
                with self._init_lock:
                    if not self._ready:
                        db.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
                        db.executescript(_SCHEMA)
                        _add_index_column(db)
                        self._ready = True
            with db:  # one transaction
                yield db
        except sqlite3.Error as e:
            raise KbError(f"the feedback store {self.path} failed: {e}") from e
        finally:
            db.close()

    def add(
        self,
        door: str,
        query: str,
        shown: Shown,
        by: AnsweredBy,
        vote: str | None = None,
        comment: str = "",
        right: dict | None = None,
    ) -> int:
        """A new row; its id (the door keeps it when a vote may follow)."""
        from .unanswered import signature

        _check_vote(vote)
        key, label = signature(query)
        now = time.time()
        values = (
            *(now, now, door, scrub(_stored_query(query)), shown.lang, shown.match),
            *(json.dumps(list(shown.entries), ensure_ascii=False), vote, _comment(comment)),
            *(json.dumps(right, ensure_ascii=False) if right else None, by.generation, key, scrub(label)),
            by.index,
        )
        with self._connect() as db:
            _prune(db, now)
            cur = db.execute(
                "INSERT INTO feedback (created, updated, door, query, lang, match, shown, vote, comment,"
                " right_entry, generation, signature, label, index_name) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                values,
            )
            return int(cur.lastrowid or 0)

    def vote(self, row_id: int, vote: str, comment: str | None = None, right: dict | None = None) -> bool:
        """Set the vote of row `row_id` (and the comment and named entry, when given); False when
        there is no such row."""
        _check_vote(vote)
        sets, values = ["vote = ?", "updated = ?"], [vote, time.time()]
        if comment is not None:
            sets.append("comment = ?")
            values.append(_comment(comment))
        if right is not None:
            sets.append("right_entry = ?")
            values.append(json.dumps(right, ensure_ascii=False))
        with self._connect() as db:
            cur = db.execute(f"UPDATE feedback SET {', '.join(sets)} WHERE id = ?", (*values, row_id))
            return cur.rowcount == 1

    def get(self, row_id: int) -> Row | None:
        with self._connect() as db:
            r = db.execute("SELECT * FROM feedback WHERE id = ?", (row_id,)).fetchone()
        return _row(r) if r else None

    def rows(self, queue: bool = False, index: str | None = None) -> list[Row]:
        """Every row, oldest first; `queue`: only the unanswered queue's; `index`: only the rows
        that index answered (and those from before the index was recorded)."""
        where = [QUEUE_WHERE] if queue else []
        if index is not None:
            where.append("index_name IN (?, '')")
        sql = "SELECT * FROM feedback" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        with self._connect() as db:
            return [_row(r) for r in db.execute(sql, () if index is None else (index,))]

    def other_indexes(self, index: str) -> int:
        """How many rows other indexes answered (what a listing for `index` leaves out)."""
        with self._connect() as db:
            sql = "SELECT COUNT(*) FROM feedback WHERE index_name NOT IN (?, '')"
            return int(db.execute(sql, (index,)).fetchone()[0])

    def prune(self, now: float | None = None) -> int:
        with self._connect() as db:
            return _prune(db, now or time.time())


def _add_index_column(db: sqlite3.Connection) -> None:
    """A store written before rows named their index gets the column (its rows keep '')."""
    if "index_name" not in {r["name"] for r in db.execute("PRAGMA table_info(feedback)")}:
        db.execute("ALTER TABLE feedback ADD COLUMN index_name TEXT NOT NULL DEFAULT ''")


def _prune(db: sqlite3.Connection, now: float) -> int:
    """Drop rows of answers nobody voted on after KEEP_UNVOTED_DAYS ("no match" rows stay: they
    are the queue), and the oldest rows past MAX_ROWS - 1. Run before every new row, so the file
    holds at most that many days of them, and at most MAX_ROWS rows."""
    cutoff = now - KEEP_UNVOTED_DAYS * 86400
    cur = db.execute("DELETE FROM feedback WHERE vote IS NULL AND match != 'none' AND created < ?", (cutoff,))
    dropped = cur.rowcount
    # Over the bound, answers nobody voted on go first (not the last hour's: a door may still hold
    # their ids for a vote, and SQLite gives a deleted newest id to the next row), then the oldest.
    unvoted = "vote IS NULL AND match != 'none' AND created < ? AND id < (SELECT MAX(id) FROM feedback)"
    for kind, args in ((unvoted, (now - 3600,)), ("1", ())):
        over = db.execute("SELECT COUNT(*) FROM feedback").fetchone()[0] - (MAX_ROWS - 1)
        if over > 0:
            dropped += db.execute(
                f"DELETE FROM feedback WHERE id IN (SELECT id FROM feedback WHERE {kind} ORDER BY id LIMIT ?)",
                (*args, over),
            ).rowcount
    return dropped


def _check_vote(vote: str | None) -> None:
    if vote is not None and vote not in VOTES:
        raise KbError(f"a vote is 'up' or 'down', not {vote!r}")


def _comment(text: str) -> str:
    return scrub(text.strip())[:MAX_COMMENT_CHARS]


def store_path(settings: Settings) -> Path:
    return home_dir(settings) / STORE_NAME


def open_store(settings: Settings) -> FeedbackStore | None:
    """The store the settings name, or None when feedback is turned off (`feedback = false`)."""
    if not settings.feedback:
        return None
    return FeedbackStore(store_path(settings))


@dataclass(frozen=True)
class AnsweredBy:
    """Which index (its folder, or milvus:NAME) and which of its generations gave an answer."""

    index: str
    generation: str


def index_name(store, index_dir: Path) -> str:
    """An index as the feedback rows name it (`store`: kb/indexing.py store_options)."""
    return f"milvus:{store.name}" if store.milvus else str(Path(index_dir).resolve())


def answered_by(kb) -> AnsweredBy:
    return AnsweredBy(index_name(kb.store, kb.index_dir), str(kb.index.manifest.get("generation", "")))


# -- the doors' one-liners --------------------------------------------------------------------------
def record_unanswered(store: FeedbackStore | None, door: str, kb, query: str, result: Any) -> int | None:
    """Put `query`, when its answer (an Answer or a SearchResult) is "no match", in the queue; the
    row's id, or None when it was answered (nothing is stored) or feedback is off. A question
    that names nothing ("help", "it does not work") is no gap a writer could fill: not queued."""
    from .unanswered import has_words

    if store is None or not result.no_match or result.vague or not has_words(query):
        return None
    return store.add(door, query, shown_by(result), answered_by(kb))


class Recording:
    """A KnowledgeBase whose "no match" answers land in the queue: what the terminal, the API and
    the MCP door use (`Recording(kb, store, "cli").search(...)`). Everything else is the KB's."""

    def __init__(self, kb, store: FeedbackStore | None, door: str) -> None:
        self._kb, self._store, self._door = kb, store, door

    def __getattr__(self, name: str):
        return getattr(self._kb, name)

    def search(self, query: str, k: int | None = None, lang: str | None = None):
        result = self._kb.search(query, k, lang)
        record_unanswered(self._store, self._door, self._kb, query, result)
        return result

    def ask(self, query: str, *args, **kwargs):
        answer = self._kb.ask(query, *args, **kwargs)
        record_unanswered(self._store, self._door, self._kb, query, answer)
        return answer
