"""The feedback store and the unanswered queue (kb/feedback.py, kb/unanswered.py) on a real SQLite
file: votes, the queue, nothing secret kept, grouping by error signature, and gold rows that the
gold reader (`kb eval`'s) accepts. No model or index: entries are built by hand."""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from dataclasses import replace

import pytest
from helpers import noisy_log

from evaluation.gold import entry_matches, load_gold
from ingest.entry import Entry
from kb.errors import KbError
from kb.feedback import (
    KEEP_UNVOTED_DAYS,
    MAX_QUERY_CHARS,
    AnsweredBy,
    FeedbackStore,
    Shown,
    entry_ref,
)
from kb.naming import resolve_entry
from kb.secrets import scrub
from kb.unanswered import export_rows, groups, signature, write_rows


def entry(title: str, doc: str = "faq/nccl.md", start: int = 10, end: int = 20, lang: str = "en") -> Entry:
    return Entry(
        id=Entry.make_id(doc, (), title),
        content_hash="h",
        doc=doc,
        lang=lang,
        title=title,
        heading_path=(),
        body=f"A: about {title}",
        start_line=start,
        end_line=end,
    )


NCCL2 = entry("NCCL error(2)", start=623, end=629)
NCCL5 = entry("NCCL error(5)", start=614, end=621)
SHOWN_MATCH = Shown("match", "en", (entry_ref(NCCL5), entry_ref(NCCL2)))
SHOWN_NONE = Shown("none", "en", (entry_ref(NCCL5),))
BY = AnsweredBy("/srv/kb-index", "gen-1")


@pytest.fixture
def store(tmp_path) -> FeedbackStore:
    return FeedbackStore(tmp_path / "home" / "feedback.sqlite3")


def nccl_paste(seed: int, code: int = 2) -> str:
    """The same failure as ten people paste it: other times, hosts, ranks, pids, IPs, noise."""
    r = random.Random(seed)
    line = (
        f"2024-05-{r.randint(1, 28):02d} 1{r.randint(0, 9)}:{r.randint(10, 59)}:{r.randint(10, 59)} "
        f"gpu-node-{r.randint(10, 99)}:{r.randint(1000, 99999)}:{r.randint(1000, 99999)} [rank{r.randint(0, 15)}] "
        f"ExternalError: Nccl error({code}), unhandled system error, peer 10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    )
    return noisy_log([line], seed, key_at=r.choice(["end", "middle"]))


def test_votes_and_the_queue(store):
    answered = store.add("slack", "NCCL error(2) in docker", SHOWN_MATCH, BY)
    gap = store.add("api", "how do I bake bread", SHOWN_NONE, BY)
    down = store.add("cli", "NCCL error(2) again", SHOWN_MATCH, BY, vote="down", comment="shm")
    up = store.add("web", "NCCL error(5)", SHOWN_MATCH, BY, vote="up")
    assert [r.id for r in store.rows(queue=True)] == [gap, down]  # an unvoted answer and a 👍 are not in it
    assert store.vote(answered, "down", "wrong entry", entry_ref(NCCL2))
    row = store.get(answered)
    assert row is not None and row.in_queue and row.right == entry_ref(NCCL2) and row.comment == "wrong entry"
    assert store.vote(gap, "up") and not store.get(gap).in_queue  # "no match was right": out of the queue
    assert not store.vote(99999, "up")  # no such row
    with pytest.raises(KbError, match="'up' or 'down'"):
        store.vote(up, "sideways")
    r = store.get(down)
    assert (r.door, r.lang, r.match, r.index, r.generation, r.shown[0]["title"]) == (
        "cli",
        "en",
        "match",
        "/srv/kb-index",
        "gen-1",
        "NCCL error(5)",
    )


def test_rows_are_read_per_index_and_a_store_from_before_keeps_its_rows(tmp_path):
    """One home serves several indexes: each reads its own rows. A store written before rows named
    their index is given the column; its rows belong to every index (nothing says whose they are)."""
    path = tmp_path / "feedback.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(_SCHEMA_BEFORE_INDEX)
    old.execute(
        "INSERT INTO feedback (created, updated, door, query, lang, match, shown, generation, signature, label)"
        " VALUES (1, 1, 'cli', 'how do I bake bread', 'en', 'none', '[]', 'gen-0', 'bake bread', 'bake bread')"
    )
    old.commit()
    old.close()
    store = FeedbackStore(path)
    store.add("api", "NCCL error(2)", SHOWN_NONE, BY)
    store.add("api", "EI0006 socket timeout", SHOWN_NONE, AnsweredBy("/srv/ascend-index", "gen-7"))
    queue = [r.query for r in store.rows(queue=True, index="/srv/kb-index")]
    assert queue == ["how do I bake bread", "NCCL error(2)"]
    assert [r.query for r in store.rows(index="/srv/ascend-index")] == [
        "how do I bake bread",
        "EI0006 socket timeout",
    ]
    assert len(store.rows()) == 3 and store.other_indexes("/srv/kb-index") == 1


_SCHEMA_BEFORE_INDEX = """CREATE TABLE feedback (id INTEGER PRIMARY KEY, created REAL NOT NULL,
updated REAL NOT NULL, door TEXT NOT NULL, query TEXT NOT NULL, lang TEXT NOT NULL, match TEXT NOT NULL,
shown TEXT NOT NULL, vote TEXT, comment TEXT NOT NULL DEFAULT '', right_entry TEXT,
generation TEXT NOT NULL, signature TEXT NOT NULL, label TEXT NOT NULL);"""


def test_tokens_given_as_arguments_are_not_stored_and_other_arguments_are():
    """ms-swift and the Hugging Face CLI take tokens as arguments; W&B logs in with its key."""
    paste = (
        "swift sft --model Qwen/Qwen2.5-7B --hub_token hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678 --push_to_hub true\n"
        "huggingface-cli login --token my-own-token-value\n"
        "wandb login --relogin 0123456789abcdef0123456789abcdef01234567\n"
        "# the token is hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432\n"
        "--tokenizer_path /data/tokenizer --max_new_tokens 1000000 --api-key sk_live_0123456789"
    )
    kept = scrub(paste)
    for secret in ("hf_AbCd", "my-own-token-value", "0123456789abcdef", "hf_ZyXw", "sk_live_"):
        assert secret not in kept, secret
    assert "--hub_token [redacted] --push_to_hub true" in kept
    assert "--tokenizer_path /data/tokenizer --max_new_tokens 1000000" in kept


@pytest.mark.parametrize("unit", ["--a-", "?a", "a://", "&key", "wandb login --x "])
def test_a_long_hostile_paste_is_scrubbed_quickly(unit):
    started = time.monotonic()
    scrub(unit * (200_000 // len(unit)))  # an unbounded pattern took minutes on `--a-`
    assert time.monotonic() - started < 10


def test_concurrent_writers_lose_nothing(store):
    def write(n: int) -> None:
        for i in range(20):
            store.add("api", f"question {n}-{i}", SHOWN_NONE, BY)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.rows()) == 160


def test_nothing_secret_is_stored(store, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "s3cr3t-value-from-env")
    paste = (
        "export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx\n"
        "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig' https://user:hunter2@git.example.org/x?api_key=K123\n"
        "slack token xoxb-1234-5678-abcdefgh, password=hunter2 db_password: 'hunter2'\n"
        "the value s3cr3t-value-from-env leaked\n"
        "ExternalError: Nccl error(2), unhandled system error"
    )
    row = store.get(store.add("web", paste, SHOWN_MATCH, BY, vote="down", comment="my password=hunter2"))
    for secret in (
        "sk-abcdefghijklmnopqrstuvwx",
        "hunter2",
        "eyJhbGciOiJIUzI1NiJ9",
        "xoxb-1234",
        "K123",
        "s3cr3t-value",
    ):
        assert secret not in row.query + row.comment, secret
    assert "Nccl error(2), unhandled system error" in row.query  # the error itself is kept
    assert scrub("NCCL_SOCKET_IFNAME=eth0 world_size=16") == "NCCL_SOCKET_IFNAME=eth0 world_size=16"
    raw = (store.path).read_bytes()
    assert b"hunter2" not in raw and b"sk-abcdefghijkl" not in raw


def test_a_huge_paste_keeps_its_head_and_its_tail(store):
    paste = "HEAD line\n" + "noise line\n" * 50_000 + "RuntimeError: the real error at the end"
    row = store.get(store.add("api", paste, SHOWN_NONE, BY))
    assert len(row.query) < MAX_QUERY_CHARS + 100
    assert row.query.startswith("HEAD line") and row.query.endswith("RuntimeError: the real error at the end")
    assert "characters left out" in row.query


def test_unvoted_answers_expire_but_the_queue_stays(store):
    old = time.time() - (KEEP_UNVOTED_DAYS + 1) * 86400
    answered = store.add("slack", "NCCL error(2)", SHOWN_MATCH, BY)
    gap = store.add("slack", "bread", SHOWN_NONE, BY)
    voted = store.add("slack", "NCCL error(5)", SHOWN_MATCH, BY, vote="up")
    with store._connect() as db:  # age them
        db.execute("UPDATE feedback SET created = ?", (old,))
    assert store.prune() == 1
    assert {r.id for r in store.rows()} == {gap, voted} and answered not in {r.id for r in store.rows()}


def test_the_store_keeps_at_most_its_bound_and_drops_the_oldest(store, monkeypatch):
    import kb.feedback as fb

    monkeypatch.setattr(fb, "MAX_ROWS", 5)
    ids = [
        store.add("api", f"question {i}", SHOWN_NONE, BY, vote="down" if i % 2 else None) for i in range(8)
    ]
    assert [r.id for r in store.rows()] == ids[-5:]  # the newest five
    # Over the bound, an answer nobody voted on goes before an older question in the queue.
    monkeypatch.setattr(fb, "MAX_ROWS", 3)
    queued = store.add("api", "bread", SHOWN_NONE, BY)
    answered = store.add("api", "NCCL error(2)", SHOWN_MATCH, BY)
    with store._connect() as db:  # answered two hours ago, and nobody voted
        db.execute("UPDATE feedback SET created = ? WHERE id = ?", (time.time() - 7200, answered))
    store.add("api", "NCCL error(5)", SHOWN_MATCH, BY)
    store.add("api", "NCCL error(12)", SHOWN_MATCH, BY)
    assert queued in [r.id for r in store.rows()] and answered not in [r.id for r in store.rows()]


def test_ten_pastes_of_one_error_are_one_group(store):
    for seed in range(10):
        store.add("web", nccl_paste(seed), SHOWN_NONE, BY)
    for seed in range(3):
        store.add("slack", nccl_paste(100 + seed, code=5), SHOWN_MATCH, BY, vote="down")
    store.add("api", "How do I bake sourdough bread?", SHOWN_NONE, BY)
    found = groups(store.rows(queue=True))
    assert [(g.count, g.no_match, g.down) for g in found] == [(10, 10, 0), (3, 0, 3), (1, 1, 0)]
    assert "Nccl error(2), unhandled system error" in found[0].label
    assert "Nccl error(5)" in found[1].label  # error(5) is another problem, whatever the noise
    assert len({signature(nccl_paste(s))[0] for s in range(10, 20)}) == 1
    # NCCL names its shared-memory segment anew in every run; the line after `Last error:` is the
    # post's first error line, so the name must not split the group.
    shm = "ncclSystemError: System call failed.\nLast error:\nError while creating shared memory segment /dev/shm/nccl-{}"
    assert signature(shm.format("LeXlEJ"))[0] == signature(shm.format("qWtRbk"))[0]


def test_export_writes_gold_rows_the_gold_reader_accepts(store, tmp_path):
    for seed in range(4):  # a true gap: nothing found, nobody named an entry
        store.add(
            "web",
            f"how do I bake bread, try {seed}?" if seed == 0 else "how do I bake bread?",
            SHOWN_NONE,
            BY,
        )
    store.add(
        "cli",
        nccl_paste(1),
        SHOWN_MATCH,
        BY,
        vote="down",
        right=entry_ref(NCCL2),
        comment="error(2), not (5)",
    )
    store.add("cli", nccl_paste(2), SHOWN_MATCH, BY, vote="down")  # same signature: the named entry covers it
    store.add("web", "NCCL WARN something vague happened", SHOWN_MATCH, BY, vote="down")  # unknown answer
    gold = tmp_path / "feedback.jsonl"
    out = export_rows(store.rows())
    write_rows(out.rows, gold)
    assert (len(out.rows), out.unknown) == (3, 1)
    loaded = load_gold(gold)
    by_kind = {tuple(x.doc for x in r.expected): r for r in loaded.rows}
    named = by_kind[("faq/nccl.md",)]
    assert named.kind == "log" and "Nccl error(" in named.query
    assert entry_matches(NCCL2, named.expected[0]) and not entry_matches(NCCL5, named.expected[0])
    gaps = [r for r in loaded.rows if not r.expected]
    assert len(gaps) == 2 and all(r.kind == "question" and r.lang == "en" for r in gaps)
    raw = [json.loads(line) for line in gold.read_text().splitlines()]
    assert raw[0] == {"meta": {"name": raw[0]["meta"]["name"]}} and raw[0]["meta"]["name"].startswith(
        "feedback"
    )
    assert any(r.get("comments") == ["error(2), not (5)"] for r in raw[1:])


def test_confirmed_answers_become_gold_rows_and_agree_or_not_with_the_queue(store):
    from kb.unanswered import export_rows

    nccl2_first = Shown("weak", "en", (entry_ref(NCCL2), entry_ref(NCCL5)))
    for seed, shown in enumerate((SHOWN_MATCH, nccl2_first, nccl2_first, nccl2_first, SHOWN_MATCH)):
        store.add("web", nccl_paste(seed), shown, BY, vote="up")  # one error: 3 👍 on error(2), 2 on (5)
    store.add("cli", "how do I bake bread?", SHOWN_NONE, BY)  # kb ask stores its "no match"...
    store.add("cli", "how do I bake bread?", SHOWN_NONE, BY, vote="up")  # ...then the 👍 on it
    store.add("api", "which port does the launcher use?", SHOWN_NONE, BY)  # a gap then, since answered
    store.add("api", "which port does the launcher use?", SHOWN_MATCH, BY, vote="up")
    store.add("web", "what does ncclInvalidUsage mean?", SHOWN_MATCH, BY, vote="down", right=entry_ref(NCCL5))
    store.add("web", "what does ncclInvalidUsage mean?", SHOWN_MATCH, BY, vote="up")  # agrees: error(5)
    store.add("web", "is NCCL_P2P_DISABLE=1 safe?", SHOWN_MATCH, BY, vote="down", right=entry_ref(NCCL2))
    store.add("web", "is NCCL_P2P_DISABLE=1 safe?", SHOWN_MATCH, BY, vote="up")  # disputed: (5) or (2)?
    store.add("web", "an answer that showed nothing", Shown("match", "en", ()), BY, vote="up")
    store.add("web", "NCCL WARN a question nobody voted on", SHOWN_MATCH, BY)

    out = export_rows(store.rows(), confirmed=True)
    by_query = {r["query"].splitlines()[0][:40]: r for r in out.rows}
    assert out.disputed == 1 and out.unknown == 0 and len(out.rows) == 5
    nccl = next(r for r in out.rows if r["kind"] == "log")
    # The most confirmed entry, though the first and the latest 👍 were on error(5).
    assert nccl["count"] == 5 and nccl["id"].startswith("feedback-up-")
    assert nccl["expected"] == [{"doc": NCCL2.doc, "line": NCCL2.start_line, "title": NCCL2.title}]
    assert by_query["how do I bake bread?"]["expected"] == []  # the 👍 replaced the unvoted gap
    # ...and a person checked it: a gap an index's precedents keep (kb/precedents.py)
    assert "checked" not in by_query["how do I bake bread?"]
    assert by_query["which port does the launcher use?"]["expected"][0]["title"] == NCCL5.title
    agreed = by_query["what does ncclInvalidUsage mean?"]
    assert agreed["id"].startswith("feedback-") and not agreed["id"].startswith("feedback-up-")
    assert by_query["is NCCL_P2P_DISABLE=1 safe?"]["expected"][0]["title"] == NCCL2.title  # the 👎's entry
    plain = export_rows(store.rows())  # without --confirmed: the queue alone, the gaps as gaps
    assert plain.disputed == 0 and not any(r["id"].startswith("feedback-up-") for r in plain.rows)
    gaps = {r["query"] for r in plain.rows if r["expected"] == []}
    assert gaps == {"how do I bake bread?", "which port does the launcher use?"}
    # What the search said and nobody checked: written, marked so precedents leave it out.
    assert all(r.get("checked") is False for r in plain.rows if r["expected"] == [])
    assert all("checked" not in r for r in plain.rows if r["expected"])


def test_the_right_entry_by_id_location_line_or_title():
    entries = [NCCL5, NCCL2, entry("如何指定网卡？", doc="faq/zh.md", start=1, end=9, lang="zh")]
    assert resolve_entry(entries, NCCL2.id) is NCCL2
    assert resolve_entry(entries, "faq/nccl.md:623-629") is NCCL2
    assert resolve_entry(entries, "faq/nccl.md:616") is NCCL5  # a line inside the entry
    assert resolve_entry(entries, "  nccl ERROR (2) ") is NCCL2  # case, spacing, punctuation aside
    assert resolve_entry(entries, "Q: 如何指定网卡") is entries[2]
    assert resolve_entry(entries, "NCCL error(3)") is None and resolve_entry(entries, " ") is None


def test_a_part_of_a_title_names_the_one_entry_that_has_it():
    """What people remember of a title: the README's `--right "NCCL error(5)"` was refused."""
    en = entry("Paddle fails with NCCL error(5), invalid usage. What causes it?", start=30, end=40)
    zh = entry("飞桨报 NCCL error(5)，是什么原因？", doc="faq/zh.md", start=30, end=40, lang="zh")
    en, zh = replace(en, translation=zh.id), replace(zh, translation=en.id)
    entries = [NCCL2, zh, en, entry("NCCL hangs at init", start=50, end=60)]
    assert resolve_entry(entries, "NCCL error(5)") is en  # one entry and its translation
    assert resolve_entry(entries, "飞桨报 NCCL error(5)") is zh  # in the language it was typed in
    assert resolve_entry(entries, "NCCL") is None  # several entries have it: which one?


def test_the_store_is_readable_by_its_owner_only(store):
    """It holds what people pasted (secrets scrubbed, but their logs): it was created 0644."""
    import stat

    store.add("api", "NCCL error(2) in my job", SHOWN_NONE, BY)
    for path in store.path.parent.glob(store.path.name + "*"):  # the database, its -wal and -shm
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_vote_is_checked_against_the_question_its_answer_echoes():
    """An agent mixing up two calls' results must not file a 👍 for bread under an NCCL entry;
    one that re-serialised the question (a trailing newline, CRLF) must not be refused."""
    from kb.answer_json import shown_in_answer
    from kb.schema import query_echo

    def vote_on(asked: str, echoed_query: str) -> None:
        shown_in_answer(None, asked, {**query_echo(echoed_query), "match": "none", "citations": []})

    log = nccl_paste(1) + "\n" + "\n".join(f"step {i} loss 0.{i}" for i in range(300))
    assert len(log) > 4000
    vote_on(log, log)
    with pytest.raises(KbError, match=r'another question than "query" \(its question starts'):
        vote_on("How do I bake sourdough bread?", log)
    follow_up = "what if I run it inside Docker?"
    vote_on(follow_up, log + "\n" + follow_up)  # a follow-up is read with the earlier turns
    vote_on("NCCL error(2)", "NCCL error(2)\n")
    vote_on("NCCL error(2)\r\nin docker ", "NCCL error(2)\nin docker")
    with pytest.raises(KbError):
        vote_on("NCCL error(5)", "NCCL error(2)")


def test_an_exported_row_has_the_questions_language_not_the_answers(store):
    """An English question answered in Chinese (lang="zh" asked for) is an en row for kb eval."""
    store.add("mcp", "How do I bake sourdough bread with rye flour?", Shown("none", "zh", ()), BY)
    [row] = export_rows(store.rows()).rows
    assert row["lang"] == "en"


def test_the_chats_word_back_to_thanks_cannot_be_rated_and_stores_nothing(tmp_path):
    """Gradio puts 👍/👎 under every reply; on "Glad it helped" a click says there is nothing to
    rate, and neither the click nor the reply adds a row (a 👎 there once queued "thanks!")."""
    from types import SimpleNamespace

    from kb.answer import small_talk_answer
    from kb.doors.web.feedback import TEXT, on_vote, remember

    store = FeedbackStore(tmp_path / "f.sqlite3")
    turns: dict = {}
    remember(None, store, turns, 1, "thanks!", small_talk_answer("thanks!", "thanks", "en"))
    out = on_vote(store, turns, SimpleNamespace(index=1, liked=False))
    assert out[3] == TEXT["reply"] and out[4] is None
    assert store.rows() == []
