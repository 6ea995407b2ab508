"""A question that names nothing ("it does not work", "help", "报错了") gets "no match" and a
request for the error, not the entry that shares its generic words (index/evidence.py
GENERIC_WORDS). The bundled knowledge base gave "it does not work" a match with commands."""

import json

import pytest
from test_cli import run_kb

from index.evidence import names_nothing
from index.post import read_post
from index.search import Searcher
from index.text import tokenize
from kb.answer import LABELS

VAGUE = ["it does not work", "help!", "training fails", "报错了", "怎么办？", "my job crashed again"]
# The stack, but not how it fails: every entry of that stack's FAQ shares these words.
# A token made of two names ("paddlepaddle") is a name too.
STACK_ONLY = ["mindspore fails", "NCCL error", "飞桨训练失败", "npu training fails", "paddlepaddle fails"]
SPECIFIC = [
    "免密登录",
    "hostfile",
    "NCCL error(2)",
    "Duplicate GPU detected",
    "hccl timeout",
    "ascend910b hangs",
]


@pytest.mark.parametrize("query", VAGUE + STACK_ONLY)
def test_generic_words_and_product_names_name_nothing(query):
    assert Searcher._names_nothing(read_post(query))


@pytest.mark.parametrize("query", SPECIFIC)
def test_one_telling_word_or_a_code_is_enough(query):
    assert not Searcher._names_nothing(read_post(query))


def test_a_command_or_an_error_code_is_something_to_go_on():
    assert not Searcher._names_nothing(read_post("it fails\n$ python -m paddle.distributed.launch train.py"))
    assert not Searcher._names_nothing(read_post("error 507035"))
    assert names_nothing(tokenize("please help, it keeps failing"))


@pytest.mark.slow
@pytest.mark.parametrize("query", ["it does not work", "help", "报错了", "mindspore fails"])
def test_the_bundled_kb_asks_for_the_error_instead_of_guessing(bundled_kb, query):
    result = bundled_kb.search(query)
    assert result.no_match and result.vague and not result.hits
    assert result.suggestions  # the nearest entries are still there to browse
    answer = bundled_kb.ask(query)
    lang = "zh" if query == "报错了" else "en"
    assert answer.no_match and answer.commands == () and answer.text == LABELS[lang]["vague"]


@pytest.mark.slow
def test_specific_short_questions_are_still_answered(bundled_kb):
    for query in ["免密登录", "NCCL error(2)", "hostfile"]:
        result = bundled_kb.search(query)
        assert not result.no_match and not result.vague, query


@pytest.mark.slow
def test_a_vague_follow_up_is_read_with_the_question_before_it(bundled_kb):
    history = [
        ("user", "Paddle job dies with Nccl error(2), unhandled system error"),
        ("assistant", "(answer)"),
    ]
    alone = bundled_kb.search_in_context("it still fails", [])
    assert alone.vague
    follow_up = bundled_kb.search_in_context("it still fails", history)
    assert not follow_up.no_match and "error(2)" in follow_up.hits[0].entry.title.lower()


@pytest.mark.slow
def test_kb_search_says_what_to_add(tmp_path):
    env = {"KB_HOME": str(tmp_path / "home")}
    p = run_kb("search", "it does not work", env=env)
    assert p.returncode == 0, p.stderr
    assert LABELS["en"]["vague"] in p.stdout
    data = json.loads(run_kb("search", "--json", "报错了", env=env).stdout)
    assert data["no_match"] and data["vague"] and data["hits"] == []


@pytest.mark.slow
def test_a_vague_question_is_no_gap_in_the_unanswered_queue(tmp_path):
    # Nor are thanks, "clear", or a paste of bytes or punctuation: the queue is for questions.
    env = {"KB_HOME": str(tmp_path / "home")}
    junk = open("/bin/sh", "rb").read(2000).decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    for query in [
        "help",
        "thanks, it works now",
        "clear",
        "!!! ??? ;;;",
        "How do I bake sourdough bread with rye flour?",
    ]:
        assert run_kb("ask", query, env=env).returncode == 0
    refused = run_kb("ask", junk, env=env)  # an executable's bytes: refused with what to do
    assert refused.returncode == 1 and "looks like binary data" in refused.stderr
    groups = json.loads(run_kb("feedback", "list", "--json", env=env).stdout)["groups"]
    assert [g["label"] for g in groups] == ["How do I bake sourdough bread with rye flour?"]


TEAM_FAQ = """# Cluster FAQ

## Q: Gloo connectFullMesh failed with Connection refused

A: Open the port range between the nodes and set `GLOO_SOCKET_IFNAME` to the interface they share.

## Q: Disk quota exceeded when saving checkpoints

A: Save to scratch instead of home: `export CKPT_DIR=/scratch/$USER/ckpt`.
"""


@pytest.mark.slow
def test_a_small_team_faq_also_asks_for_the_error_and_queues_nothing(tmp_path):
    # A team's FAQ may hold none of the generic words: the question is vague all the same, and
    # it is no gap for the queue (it once got a plain "no match" there and was queued).
    from kb.feedback import FeedbackStore, Recording
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "faq.md").write_text(TEAM_FAQ, "utf-8")
    ingest([str(tmp_path / "docs")], tmp_path / "index")
    kb = KnowledgeBase.open(index=str(tmp_path / "index"))
    store = FeedbackStore(tmp_path / "f.sqlite3")
    for query, lang in (("it does not work", "en"), ("训练报错了", "zh")):
        answer = Recording(kb, store, "cli").ask(query)
        assert answer.no_match and answer.vague and answer.text == LABELS[lang]["vague"], query
    assert Recording(kb, store, "cli").search("Gloo connectFullMesh failed").hits  # still answers
    assert store.rows() == []
