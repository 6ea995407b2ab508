"""Bad queries at the service and at the CLI (docs/reliability.md, case 2).

Every query either gets an answer (possibly "no match") or a one-line message that says what to
do; nothing raises a traceback, nothing in the query is executed, and what was asked comes back
as plain text. The web door's handling of the same inputs is in tests/test_web_api.py and
tests/test_security.py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from conftest import needs_shared

from kb.answer import LABELS
from kb.errors import QueryError
from kb.schema import ask_json, search_json
from kb.service import KnowledgeBase

pytestmark = [pytest.mark.slow, needs_shared]

NCCL_LINE = "ExternalError: Nccl error(2), unhandled system error"
MB = 1024 * 1024
DEFAULT_LIMIT = 2 * MB  # Settings.max_query_bytes


def one_mb_log() -> str:
    """About 1 MB of a healthy training log, the error on the last line (where it usually is)."""
    rnd = random.Random(11)
    lines = []
    while sum(len(line) + 1 for line in lines) < MB:
        lines.append(
            f"I0510 09:{rnd.randint(10, 59)}:{rnd.randint(10, 59)}.{rnd.randint(100000, 999999)} "
            f"{rnd.randint(1000, 9999)} trainer.py:{rnd.randint(10, 400)}] [rank{rnd.randint(0, 7)}] "
            f"step {len(lines)} loss {rnd.random():.4f} lr 3e-4 throughput {rnd.randint(100, 900)} samples/s"
        )
    return "\n".join([*lines, "Traceback (most recent call last):", NCCL_LINE])


_RND = random.Random(5)  # one generator: Random(5) made anew for each byte gave 4096 equal bytes
JUNK = bytes(_RND.randrange(256) for _ in range(4096))
INJECTIONS = [
    "'; DROP TABLE entries; --",
    '" OR 1=1 --',
    "<script>alert(document.cookie)</script>",
    '<img src=x onerror="alert(1)">',
    "{{7*7}} ${7*7} #{7*7}",
    "$(touch {canary}) `touch {canary}`; touch {canary}",
    "../../../../etc/passwd",
]


# -- service -----------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["", " ", " \n\t\r\n ", "\x00", "\x00 \x00\n"])
def test_empty_queries_are_refused_with_a_message(seeds_kb, query):
    for call in (seeds_kb.search, seeds_kb.ask):
        with pytest.raises(QueryError, match="the query is empty: paste an error message"):
            call(query)


def test_one_megabyte_log_is_answered(seeds_kb):
    log = one_mb_log()
    assert MB <= len(log.encode()) < DEFAULT_LIMIT
    answer = seeds_kb.ask(log)
    assert not answer.no_match and answer.citations[0].entry.title == "NCCL error(2)"


def test_ten_megabyte_query_is_refused_naming_the_limit(seeds_kb):
    big = "x" * (10 * MB)
    for call in (seeds_kb.search, seeds_kb.ask):
        with pytest.raises(QueryError) as err:
            call(big)
        assert str(err.value).startswith(
            f"the query is {10 * MB} bytes; the limit is {DEFAULT_LIMIT} (KB_MAX_QUERY_BYTES)"
        )


def test_the_limit_is_configurable(seeds_index, monkeypatch):
    from kb.config import load_settings

    monkeypatch.setenv("KB_MAX_QUERY_BYTES", "4096")
    kb = KnowledgeBase(load_settings(), seeds_index)
    assert kb.settings.max_query_bytes == 4096
    with pytest.raises(QueryError, match="the query is 4097 bytes; the limit is 4096"):
        kb.search("y" * 4097)
    assert kb.search(NCCL_LINE + " " * (4096 - len(NCCL_LINE))).hits  # exactly at the limit


JUNK_CASES = [
    # what "\ud800" in a JSON body or undecodable bytes in argv become in Python
    ("lone-surrogates", "Nccl \ud800 error(2) \udcff unhandled system error"),
    ("emoji-only", "🔥😭🚀🤖"),
    ("punctuation", "!!! ??? ... ;;;"),
    ("one-huge-word", "A" * 300_000),
]


@pytest.mark.parametrize("query", [JUNK.decode("latin-1"), JUNK.decode("utf-8", errors="replace"),
                                   "\x01\x02\x03\x1b[31m\x7f\x08"], ids=["latin1", "replaced", "controls"])  # fmt: skip
def test_binary_text_is_refused_not_answered(seeds_kb, query):
    """A file's bytes sent as text (an API client, a paste): before, random bytes got 问题避免
    on the seeds index as a match."""
    for call in (seeds_kb.search, seeds_kb.ask):
        with pytest.raises(QueryError, match="looks like binary data .* `strings FILE`"):
            call(query)


@pytest.mark.parametrize("name,query", JUNK_CASES, ids=[c[0] for c in JUNK_CASES])
def test_junk_gets_an_answer_not_a_crash(seeds_kb, name, query):
    result = seeds_kb.search(query)
    answer = seeds_kb.ask(query)
    json.dumps(search_json(result), ensure_ascii=False).encode("utf-8")  # every door can print it
    json.dumps(ask_json(answer), ensure_ascii=False).encode("utf-8")
    if name != "lone-surrogates":
        assert result.no_match and answer.no_match, [h.entry.title for h in result.hits]
    else:
        assert "\ufffd" in result.query and result.hits[0].entry.title == "NCCL error(2)"


def test_nul_bytes_are_spaces(seeds_kb):
    result = seeds_kb.search("ExternalError:\x00Nccl error(2),\x00unhandled system error\x00")
    assert "\x00" not in result.query and result.hits[0].entry.title == "NCCL error(2)"


@pytest.mark.parametrize(
    "query,lang",
    [
        ("🔥🔥 " + NCCL_LINE + " 😭 help", "en"),
        ("多机训练报错 " + NCCL_LINE + "，这是什么原因？", "zh"),
        ("昇腾训练报 Init plugin so failed, ret = 1343225860，怎么办？", "zh"),
    ],
)
def test_emoji_and_mixed_language_find_the_entry(seeds_kb, query, lang):
    result = seeds_kb.search(query)
    assert result.lang == lang and not result.no_match
    top3 = [h.entry.title for h in result.hits[:3]]
    assert any(t == "NCCL error(2)" or "1343225860" in t for t in top3), top3
    assert seeds_kb.ask(query).lang == lang


@pytest.mark.parametrize("template", INJECTIONS)
def test_injection_strings_come_back_as_text(seeds_kb, template, tmp_path):
    canary = tmp_path / "executed"
    query = template.replace("{canary}", str(canary))
    result, answer = seeds_kb.search(query), seeds_kb.ask(query)
    assert result.query == query and answer.query == query  # verbatim, not interpreted
    assert json.loads(json.dumps(search_json(result)))["query"] == query
    assert result.no_match and answer.no_match  # none of these is a training error
    assert not canary.exists()


# -- CLI -----------------------------------------------------------------------------------------
def kb_cli(*args: str | bytes, stdin: bytes | None = None, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "kb", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def one_line_error(p, *needles: str) -> str:
    err = p.stderr.decode()
    assert p.returncode == 1 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err, err
    return err


def test_cli_a_log_over_the_query_limit_is_searched_around_its_error_and_says_so(seeds_index):
    """3 MB on stdin, the error in the middle with 1 MB of healthy steps after it: searched in part
    (its first and last lines and the region around the error), and stderr says which part."""
    healthy = one_mb_log().rsplit("\nTraceback", 1)[0]
    log = "\n".join([healthy, healthy, "Traceback (most recent call last):", NCCL_LINE, healthy])
    assert len(log.encode()) > 3 * MB > DEFAULT_LIMIT
    p = kb_cli("ask", "-", "--json", "--index", str(seeds_index), stdin=log.encode())
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["citations"][0]["title"] == "NCCL error(2)"
    note = p.stderr.decode().strip()
    assert note.startswith("kb ask: the paste is 3.") and "the regions around 2 error lines" in note, note


def test_cli_a_paste_over_the_paste_limit_is_refused_before_any_index_is_built(tmp_path):
    # Up to MAX_PASTE_BYTES a paste is cut to the part that matters (the test above); past it, refused.
    from kb.query import MAX_PASTE_BYTES

    p = kb_cli("ask", "-", stdin=b"x" * (MAX_PASTE_BYTES + 10), env={"KB_HOME": str(tmp_path)})
    one_line_error(p, f"kb ask: the query is {MAX_PASTE_BYTES + 1} bytes; the limit is {MAX_PASTE_BYTES}")
    assert list(tmp_path.iterdir()) == []  # refused before the bundled index was built


def test_cli_limit_from_the_environment(seeds_index):
    p = kb_cli("search", "z" * 5000, "--index", str(seeds_index), env={"KB_MAX_QUERY_BYTES": "4096"})
    one_line_error(p, "the query is 5000 bytes; the limit is 4096 (KB_MAX_QUERY_BYTES)")


def test_cli_one_megabyte_log_on_stdin_is_answered(seeds_index):
    p = kb_cli("ask", "-", "--json", "--index", str(seeds_index), stdin=one_mb_log().encode())
    assert p.returncode == 0, p.stderr.decode()
    a = json.loads(p.stdout)
    assert not a["no_match"] and a["citations"][0]["title"] == "NCCL error(2)"


CLI_CASES = [
    (
        "invalid-utf8-stdin",
        ("search", "-"),
        b"\xff\xfe Nccl error(2), \xc3\x28 unhandled system error \x80",
        True,
    ),
    ("invalid-utf8-argv", ("search", b"Nccl error(2), \xff\xfe unhandled system error"), None, True),
    ("nul-stdin", ("ask", "-"), NCCL_LINE.replace(" ", "\x00").encode(), True),
    ("emoji-mixed-argv", ("search", "🔥 多机训练报错 " + NCCL_LINE + " 😭"), None, True),
    # PowerShell's `> log.txt` (UTF-16 with a mark), the same without one, a zh_CN.GBK terminal.
    ("utf16-stdin", ("ask", "-"), ("多机训练报错 " + NCCL_LINE).encode("utf-16"), True),
    ("utf16-no-mark-stdin", ("search", "-"), NCCL_LINE.encode("utf-16-le"), True),
    ("gbk-stdin", ("search", "-"), ("多机训练报错 " + NCCL_LINE).encode("gbk"), True),
]


@pytest.mark.parametrize("name,args,stdin,hit", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_odd_input_is_answered(seeds_index, name, args, stdin, hit):
    p = kb_cli(*args, "--json", "--index", str(seeds_index), stdin=stdin)
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)  # valid UTF-8 JSON whatever came in
    titles = [h["title"] for h in out["hits"]] if "hits" in out else [c["title"] for c in out["citations"]]
    assert ("NCCL error(2)" in titles[:3]) is hit, titles
    assert not out["no_match"] if hit else out["no_match"]
    if name.startswith("invalid-utf8"):
        assert "\ufffd" in out["query"]
    if name in ("utf16-stdin", "gbk-stdin"):
        assert out["query"].startswith("多机训练报错 ")


@pytest.mark.parametrize("command", ["ask", "search"])
def test_cli_binary_stdin_is_refused_with_what_to_do(seeds_index, command):
    """Random bytes, and an executable's header (NULs between its letters): not a log."""
    elf = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00>\x00\x01" + bytes(range(1, 32)) * 40
    for data in (JUNK, elf):
        p = kb_cli(command, "-", "--index", str(seeds_index), stdin=data)
        assert p.returncode == 1 and not p.stdout
        assert "looks like binary data" in p.stderr.decode() and "`strings FILE`" in p.stderr.decode()


def test_cli_injection_is_printed_as_text(seeds_index, tmp_path):
    canary = tmp_path / "executed"
    for template in INJECTIONS:
        query = template.replace("{canary}", str(canary))
        p = kb_cli("search", query, "--json", "--index", str(seeds_index))
        assert p.returncode == 0, p.stderr.decode()
        assert json.loads(p.stdout)["query"] == query
    human = kb_cli("ask", INJECTIONS[2], "--index", str(seeds_index))
    assert human.returncode == 0 and LABELS["en"]["no_match"] in human.stdout.decode()
    assert not canary.exists()


def test_service_and_cli_agree_on_the_same_odd_query(seeds_kb, seeds_index):
    """The CLI is a thin door: the same odd query gives the same JSON as the service."""
    query = "🔥 " + NCCL_LINE + "\x00 <b>html</b> '; DROP TABLE x; --"
    p = kb_cli("search", "-", "--json", "--index", str(seeds_index), stdin=query.encode())
    assert p.returncode == 0, p.stderr.decode()
    want = search_json(seeds_kb.search(query, k=5))
    got = json.loads(p.stdout)
    assert got == json.loads(json.dumps(want))  # the same shape, hits and scores
