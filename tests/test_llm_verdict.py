"""The model's "none of these applies" verdict (kb/llm.py): a confident retrieval match that the
model, having read the entries, finds to be about another problem is answered "no match".

Retrieval is real (the seeds index) and the model is a real OpenAI-compatible HTTP server on
127.0.0.1 (tests/openai_stub.py) whose words are scripted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from openai_stub import OpenAIStub, Reply

from kb.answer import LABELS
from kb.config import LlmSettings
from kb.llm import NONE_APPLIES, llm_answer, says_none_applies
from kb.service import KnowledgeBase

# Retrieval matches this confidently to the seeds' HCCL "Init plugin so failed" entry.
INIT_PLUGIN = "Init plugin so failed, ret = 1343225860"
ANSWER = "HCCL could not initialise: check `rank_table.json` [1]."


@pytest.mark.parametrize(
    "text",
    [
        NONE_APPLIES,
        f"**{NONE_APPLIES}**",
        f"`{NONE_APPLIES}`.",
        f"\n\n{NONE_APPLIES}\n",
        f"Source [1] is about plugin loading, not this timeout.\n{NONE_APPLIES}",
    ],
)
def test_the_verdict_is_read_however_the_model_dresses_it(text):
    assert says_none_applies(text)


@pytest.mark.parametrize(
    "text", [ANSWER, f"{ANSWER} Unlike what {NONE_APPLIES} would say, [1] applies.", "", "NO SOURCE"]
)
def test_an_answer_is_not_a_verdict(text):
    assert not says_none_applies(text)


@pytest.fixture(scope="module")
def stub():
    with OpenAIStub() as s:
        yield s


def llm_settings(stub: OpenAIStub) -> LlmSettings:
    return LlmSettings(model="stub-model", base_url=stub.base_url, timeout_s=5.0, max_retries=0)


@pytest.fixture(scope="module")
def matched(seeds_kb):
    result = seeds_kb.search(INIT_PLUGIN)
    assert not result.no_match and not result.weak, "the premise: retrieval calls this a match"
    return result


@pytest.mark.slow
@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_verdict_turns_a_match_into_no_match_with_the_entries_as_suggestions(stub, matched, stream):
    stub.script(Reply(f"**{NONE_APPLIES}**\n", pieces=4))
    tokens: list[str] = []
    answer = llm_answer(matched, llm_settings(stub), on_token=tokens.append if stream else None)
    assert answer.no_match and answer.mode == "llm" and answer.strength == "none"
    assert answer.text == LABELS["en"]["judged_none"]
    assert answer.commands == () and answer.citations == ()
    assert [h.entry.id for h in answer.suggestions] == [h.entry.id for h in matched.hits[:3]]
    if stream:  # the marker itself never reaches the reader
        assert tokens == [answer.text]
    assert NONE_APPLIES in stub.requests[-1].prompt_text  # the model was told how to say it


@pytest.mark.slow
def test_an_ordinary_answer_still_streams_from_its_first_line(stub, matched):
    stub.script(Reply(f"\n{ANSWER}\nRegenerate it [1].\n", pieces=6))
    tokens: list[str] = []
    answer = llm_answer(matched, llm_settings(stub), on_token=tokens.append)
    assert not answer.no_match and answer.citations[0].n == 1
    assert "".join(tokens).strip() == answer.text and len(tokens) >= 2


@pytest.mark.slow
def test_a_verdict_after_an_explanation_replaces_what_was_streamed(stub, matched):
    stub.script(Reply(f"Source [1] is about plugin loading, not this [1].\n{NONE_APPLIES}\n"))
    tokens: list[str] = []
    answer = llm_answer(matched, llm_settings(stub), on_token=tokens.append)
    assert answer.no_match and answer.citations == ()
    assert tokens and NONE_APPLIES not in "".join(tokens)  # the stream showed the first line only


@pytest.mark.slow
def test_the_service_answers_in_the_askers_language(stub, seeds_kb):
    kb = KnowledgeBase(replace(seeds_kb.settings, llm=llm_settings(stub)), seeds_kb.index_dir)
    stub.script(NONE_APPLIES)
    answer = kb.ask("多机训练时报错 Init plugin so failed, ret = 1343225860，怎么办？")
    assert answer.no_match and answer.lang == "zh"
    assert answer.text == LABELS["zh"]["judged_none"] and answer.suggestions


@pytest.mark.slow
def test_kb_ask_reports_it_and_queues_the_question_for_writers(stub, seeds_index, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_LLM_")}
    env.update(stub.kb_env(timeout_s=5), KB_HOME=str(tmp_path / "home"))

    def kb(*args: str) -> subprocess.CompletedProcess:
        run = subprocess.run(
            [sys.executable, "-m", "kb", *args, "--index", str(seeds_index)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return run

    stub.script(NONE_APPLIES)
    out = json.loads(kb("ask", "--json", INIT_PLUGIN).stdout)
    assert out["no_match"] and out["match"] == "none" and out["mode"] == "llm"
    assert out["commands"] == [] and out["citations"] == [] and len(out["suggestions"]) >= 1
    text = kb("ask", INIT_PLUGIN).stdout
    assert LABELS["en"]["judged_none"] in text and NONE_APPLIES not in text
    assert LABELS["en"]["suggest"] in text
    groups = json.loads(kb("feedback", "list", "--json").stdout)["groups"]
    assert len(groups) == 1 and groups[0]["count"] == 2
