"""The language model reads every answered post, the closest entries included, and `kb eval --llm`
measures what it does with them (kb/service.py, evaluation/llm_stage.py).

Retrieval is real (the seeds index, the committed ranking model). The model is a real
OpenAI-compatible HTTP server on 127.0.0.1 (tests/openai_stub.py) that reads like a careful
engineer would (tests/helpers.py `engineer_reader`): it cites the source whose title names the post's trouble, and says no source
applies when none does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import DUPLICATE_GPU, engineer_reader
from openai_stub import OpenAIStub

from kb.config import LlmSettings, load_settings
from kb.llm import NO_CITATION, NONE_APPLIES
from kb.service import KnowledgeBase

# Retrieval: a closest entry (GPU verification) with the NCCL error(5) entry, the answer, among
# the sources (DUPLICATE_GPU); a confident match to the wrong entry; a confident match to the right one.
OUT_OF_MEMORY = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
INIT_PLUGIN = "Init plugin so failed, ret = 1343225860"


@pytest.fixture(scope="module")
def stub():
    with OpenAIStub(respond=engineer_reader) as s:
        yield s


def llm_settings(stub: OpenAIStub) -> LlmSettings:
    return LlmSettings(model="stub-model", base_url=stub.base_url, timeout_s=5.0, max_retries=0)


@pytest.fixture(scope="module")
def kb(stub, seeds_kb):
    return KnowledgeBase(replace(seeds_kb.settings, llm=llm_settings(stub)), seeds_kb.index_dir)


def _premise(seeds_kb, query: str, strength: str, first_title: str | None = None) -> None:
    result = seeds_kb.search(query)
    assert result.strength == strength, f"the premise: retrieval calls {query!r} {strength}"
    if first_title is not None:
        assert first_title not in result.hits[0].entry.title, (
            "the premise: retrieval's first is another entry"
        )


@pytest.mark.slow
def test_a_closest_entry_is_read_by_the_model_which_cites_the_answer(kb, seeds_kb):
    _premise(seeds_kb, DUPLICATE_GPU, "weak", "NCCL error(5)")
    answer = kb.ask(DUPLICATE_GPU)
    assert answer.mode == "llm" and answer.strength == "match"
    assert answer.citations[0].entry.title == "NCCL error(5)"


@pytest.mark.slow
def test_a_closest_entry_the_model_finds_wrong_is_no_match(stub, seeds_kb):
    with OpenAIStub() as silent:
        silent.script(NONE_APPLIES)
        kb = KnowledgeBase(replace(seeds_kb.settings, llm=llm_settings(silent)), seeds_kb.index_dir)
        answer = kb.ask(DUPLICATE_GPU)
    assert answer.no_match and answer.mode == "llm" and answer.suggestions


@pytest.mark.slow
def test_a_closest_entry_stays_one_when_the_model_cites_nothing(seeds_kb):
    with OpenAIStub() as vague:
        vague.script("Check your GPUs.")
        kb = KnowledgeBase(replace(seeds_kb.settings, llm=llm_settings(vague)), seeds_kb.index_dir)
        answer = kb.ask(DUPLICATE_GPU)
    assert answer.strength == "weak" and answer.commands == () and answer.notice == NO_CITATION["en"]


def _gold(tmp_path: Path) -> Path:
    rows = [
        {"meta": {"name": "llm-probe"}},
        {"id": "dup", "query": DUPLICATE_GPU, "lang": "en", "kind": "log",
         "expected": [{"doc": "002_1ad754c4b0581e45.txt", "line": 614}]},
        {"id": "oom", "query": OUT_OF_MEMORY, "lang": "en", "kind": "log", "expected": []},
        {"id": "hccl", "query": INIT_PLUGIN, "lang": "en", "kind": "log",
         "expected": [{"doc": "001_6befd99b7fbb14ab.txt", "line": 5}]},
    ]  # fmt: skip
    path = tmp_path / "probe.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


@pytest.mark.slow
def test_kb_eval_llm_judges_what_the_model_returns(stub, seeds_kb, seeds_index, tmp_path):
    from evaluation.metrics import grouped
    from evaluation.run import evaluate

    _premise(seeds_kb, OUT_OF_MEMORY, "match")
    settings = replace(load_settings(), llm=llm_settings(stub))
    (res,) = evaluate([_gold(tmp_path)], index=str(seeds_index), settings=settings, llm=True)
    alone = grouped(res.judged["ours"], 10)["overall"]
    read = grouped(res.judged["ours + LLM"], 10)["overall"]
    assert alone["hit@1"] == 0.5 and alone["abstention"] == 0.0  # error(5) not first; OOM shown as a match
    assert read["hit@1"] == 1.0 and read["abstention"] == 1.0 and read["false_abstention"] == 0.0
    assert res.llm is not None
    assert {k: res.llm[k] for k in ("asked", "no_source_applies", "cited", "changed_first", "fell_back")} == {
        "asked": 3, "no_source_applies": 1, "cited": 2, "changed_first": 1, "fell_back": 0,
    }  # fmt: skip
    assert res.report(10)["language_model"]["model"] == "stub-model"


@pytest.mark.slow
def test_kb_eval_llm_from_the_command_line(stub, seeds_index, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_LLM_")}
    env["KB_HOME"] = str(tmp_path / "home")
    gold = _gold(tmp_path)

    def kb_eval(extra_env: dict, *flags: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "kb", "eval", str(gold), "--index", str(seeds_index), "--llm", *flags]
        return subprocess.run(cmd, env={**env, **extra_env}, capture_output=True, text=True, timeout=300)

    bare = kb_eval({}, "--json")
    assert bare.returncode == 1 and "KB_LLM_MODEL" in bare.stderr and "Traceback" not in bare.stderr
    run = kb_eval(stub.kb_env(timeout_s=5), "--json")
    assert run.returncode == 0, run.stderr
    (report,) = json.loads(run.stdout)["sets"]
    assert report["systems"]["ours + LLM"]["overall"]["abstention"] == 1.0
    assert report["language_model"]["no_source_applies"] == 1
    text = kb_eval(stub.kb_env(timeout_s=5)).stdout
    assert "language model stub-model: read 3 answers; no source applies: 1" in text
