"""kb/doors/batch.py: JSON Lines in, one JSON line out per query, bad lines reported in place."""

import io
import json

import pytest

from kb.doors.batch import parse_line, read_lines, run_batch
from kb.errors import QueryError


def check(text: str) -> str:
    if not text.strip():
        raise QueryError("the query is empty")
    return text


def test_each_line_answered_in_order_with_its_id_and_lang(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(
        '{"id": 1, "text": "a"}\n\n  \n"b"\n{"query": "c", "lang": "zh"}\n[1]\n{"text": " "}\n{"id": "x", "lang": "en"}\n'
        '{"text": "d", "lang": "mixed"}\n',
        "utf-8",
    )
    seen = []

    def answer(text, lang):
        seen.append((text, lang))
        return {"query": text, "lang": lang or "en"}

    out = io.StringIO()
    assert run_batch(read_lines(str(f)), answer, check, out) == 1
    got = [json.loads(line) for line in out.getvalue().splitlines()]
    assert seen == [("a", None), ("b", None), ("c", "zh"), ("d", None)]  # "mixed" labels a post
    assert got[:3] == [
        {"id": 1, "line": 1, "query": "a", "lang": "en"},
        {"line": 4, "query": "b", "lang": "en"},  # lines 2 and 3 are blank: skipped, still counted
        {"line": 5, "query": "c", "lang": "zh"},
    ]
    assert [g["line"] for g in got[3:]] == [6, 7, 8, 9]
    assert "object" in got[3]["error"] and "empty" in got[4]["error"] and "text" in got[5]["error"]
    assert got[5]["id"] == "x" and got[6] == {"line": 9, "query": "d", "lang": "en"}


def test_a_clean_batch_exits_zero_and_undecodable_bytes_do_not_stop_it(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_bytes(b'{"text": "ok \xff"}\n{"text": "two"}\n')
    out = io.StringIO()
    assert run_batch(read_lines(str(f)), lambda t, lang: {"q": t}, check, out) == 0
    assert [json.loads(line)["q"] for line in out.getvalue().splitlines()] == ["ok \ufffd", "two"]


@pytest.mark.parametrize("line", ["{", "3", '{"text": 3}', '{"id": "x"}'])
def test_lines_that_are_not_queries_say_why(line):
    with pytest.raises(ValueError):
        parse_line(line)
