"""evaluation/gold.py: the gold-set formats, their files, and what counts as a right answer."""

import importlib.util
import json
import re

import pytest
from conftest import ROOT, SHARED, needs_shared
from fakes import entry

from evaluation.gold import Expected, entry_matches, load_gold
from kb.errors import KbError

GOLD = ROOT / "eval" / "gold"


@pytest.mark.parametrize(
    "lines,message",
    [
        (['{"id": "a", "query": "x"}'], ":1: missing expected"),
        (
            ['{"id": "a", "query": "x", "expected": []}', '{"id": "a", "query": "y", "expected": []}'],
            "duplicate id",
        ),
        (['{"id": "a", "query": "x", "expected": [{"doc": "d.md"}]}'], "needs a 'line' or a 'title'"),
        (["{not json"], ":1: not JSON"),
        (['{"meta": {"name": "empty"}}'], "has no queries"),
        (
            [
                '{"id": "a", "text": "x", "expected": [{"kb": "mine", "doc": "d.md", "start_line": 1, "end_line": 2}]}'
            ],
            'names the knowledge base "mine" (its "kb"), a folder of the shared data',
        ),
    ],
)
def test_bad_gold_files_are_refused_with_the_line(tmp_path, lines, message, monkeypatch):
    # No shared data above the file, wherever the temporary folder is (a TMPDIR beside a checkout
    # with ../shared found it, and "mine" was looked for there instead of refused).
    monkeypatch.setattr("evaluation.gold.shared_dir", lambda start, setting="": None)
    path = tmp_path / "g.jsonl"
    path.write_text("\n".join(lines), "utf-8")
    with pytest.raises(KbError, match=re.escape(message)):
        load_gold(path)


def test_meta_line_names_the_kb_and_its_languages(tmp_path):
    path = tmp_path / "g.jsonl"
    rows = [
        {"meta": {"kb": "shared:corpus", "langs": ["en"], "name": "x"}},
        {"id": "1", "query": "q", "expected": []},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    gold = load_gold(path, shared=str(tmp_path / "elsewhere"))
    assert gold.kb == tmp_path / "elsewhere" / "corpus" and gold.langs == ("en",) and gold.name == "x"
    assert gold.rows[0].kind == "query" and not gold.rows[0].answerable


def test_committed_seed_gold_set_has_the_shapes_people_paste():
    gold = load_gold(GOLD / "seeds.jsonl")
    rows = gold.rows
    assert len(rows) >= 100
    assert sum(not r.answerable for r in rows) >= 20
    logs = [r for r in rows if r.kind == "log"]
    assert sum(r.query.count("\n") >= 30 for r in logs) >= 20  # long pastes, not one-liners
    assert {r.lang for r in rows if r.kind == "question"} == {"zh", "en"}
    assert {r.lang for r in rows if not r.answerable} == {"zh", "en"}


@needs_shared
def test_crosslingual_generator_reproduces_the_committed_sets():
    spec = importlib.util.spec_from_file_location("make_crosslingual", ROOT / "eval" / "make_crosslingual.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sets = mod.build_sets(SHARED)
    for name, rows in sets.items():
        assert (GOLD / name).read_text("utf-8") == mod.render(rows), (
            f"{name} is stale: run eval/make_crosslingual.py"
        )
    assert (
        len(sets["crosslingual_zh2en.jsonl"]) - 1 == 233 and len(sets["crosslingual_both.jsonl"]) - 1 == 466
    )


def test_real_post_rows_are_searched_in_their_own_knowledge_base(tmp_path):
    rows = [
        {"id": "p1", "text": "title\n\nbody", "lang": "en", "match": "exact",
         "expected": [{"kb": "alpha", "doc": "a.md", "title": "T", "start_line": 10, "end_line": 20},
                      {"kb": "beta", "doc": "b.md", "title": "T", "start_line": 1, "end_line": 4, "translation_of": 0}]},
        {"id": "p2", "text": "no answer here", "lang": "zh", "match": "none", "expected": []},
    ]  # fmt: skip
    path = tmp_path / "real.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    gold = load_gold(path, shared=str(tmp_path))
    assert gold.per_row_kb and gold.kbs == {"alpha": tmp_path / "alpha", "beta": tmp_path / "beta"}
    p1, p2 = gold.rows
    assert (p1.kb, p1.kind, p1.query) == ("alpha", "exact", "title\n\nbody")
    assert p1.expected[1].translation_of == 0 and (p2.kb, p2.answerable) == (None, False)


def test_a_range_label_needs_half_the_entry_inside_it():
    label = Expected("a.md", start=10, end=20)
    assert entry_matches(entry("a.md", 12, 18), label)  # all inside
    assert entry_matches(entry("a.md", 5, 14), label)  # 5 of 10 lines inside: half is enough
    assert not entry_matches(entry("a.md", 1, 14), label)  # 5 of 14
    assert not entry_matches(entry("b.md", 12, 18), label)  # another document
