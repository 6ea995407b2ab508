"""A section's one-paragraph lead-in gives its place to the entry of its section below it
(index/lead_ins.py): the parser's entries of a page we write, and a real corpus page searched
with the real embedder and the shipped model."""

import shutil

import pytest
from conftest import CORPUS, needs_shared

from index.lead_ins import WINDOW, is_lead_in, is_under, sections_first
from ingest.collect import entries_from_text

PAGE = """# Launch problems

## Rendezvous errors

Rendezvous errors come from the launcher before any collective runs.

### The job stops with `RendezvousTimeoutError`

Start every node within the join timeout, or raise `--rdzv-conf join_timeout=900`.

### `RendezvousClosedError` on a restarted node

The run was closed when another node finished; start all nodes again.

## Port errors

| symptom | cause |
|---|---|
| `Address already in use` | an old job still holds the port |

### `EADDRINUSE` on port 29500

Pick another `--master_port`, or stop the process that holds it.

## Unrelated

Something else altogether, with an answer of its own.
"""


@pytest.fixture(scope="module")
def entries():
    return {e.title: e for e in entries_from_text("launch.md", PAGE)}


def _ranked(entries, *titles):
    index = list(entries.values())
    return [(index.index(entries[t]), None, 10.0 - k) for k, t in enumerate(titles)], index


def _titles(ranked, index):
    return [index[shown].title for shown, _, _ in ranked]


def test_a_one_paragraph_section_is_a_lead_in_and_a_table_is_content(entries):
    assert is_lead_in(entries["Rendezvous errors"])
    assert not is_lead_in(entries["Port errors"])  # its table answers something of its own
    assert is_under(entries["RendezvousClosedError on a restarted node"], entries["Rendezvous errors"])
    assert not is_under(entries["EADDRINUSE on port 29500"], entries["Rendezvous errors"])


def test_the_first_entry_of_its_section_takes_the_lead_ins_place_and_score(entries):
    ranked, index = _ranked(
        entries,
        "Rendezvous errors",
        "Unrelated",
        "RendezvousClosedError on a restarted node",
        "The job stops with RendezvousTimeoutError",
    )
    out = sections_first(ranked, index)
    assert _titles(out, index) == [
        "RendezvousClosedError on a restarted node",
        "Rendezvous errors",  # once: still above its section's other entry
        "Unrelated",
        "The job stops with RendezvousTimeoutError",
    ]
    assert out[0][2] == out[1][2] == ranked[0][2]
    assert [s for _, _, s in out] == sorted((s for _, _, s in out), reverse=True)


def test_an_overview_and_a_far_entry_keep_their_places(entries):
    ranked, index = _ranked(entries, "Port errors", "EADDRINUSE on port 29500", "Unrelated")
    assert sections_first(ranked, index) == ranked  # a table is not a lead-in
    far = ["Rendezvous errors", *["Unrelated"] * WINDOW, "The job stops with RendezvousTimeoutError"]
    ranked, index = _ranked(entries, *far)
    assert sections_first(ranked, index) == ranked  # its entry is beyond the next WINDOW places


@pytest.mark.slow
@needs_shared
def test_a_question_about_an_entry_gets_it_before_the_lead_in_of_its_section(tmp_path):
    # A real MindSpore page: `AICPU算子执行问题` is one sentence over the E39999 entry, and came
    # first for a question about the failure that entry answers.
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    for lang in ("zh", "en"):
        (tmp_path / "docs" / lang).mkdir(parents=True)
        shutil.copy(
            CORPUS / "mindspore_error_analysis" / lang / "cann_error_cases.md", tmp_path / "docs" / lang
        )
    ingest([str(tmp_path / "docs")], tmp_path / "index")
    kb = KnowledgeBase.open(index=str(tmp_path / "index"))
    for question, lead_in in (
        ("AICPU算子执行失败了怎么办", "AICPU算子执行问题"),
        ("the AICPU operator failed to execute, what should I do", "AICPU Operator Execution Problem"),
    ):
        result = kb.search(question)
        titles = [h.entry.title for h in (result.hits or result.suggestions)]
        assert "E39999" in titles[0], (question, titles)
        assert titles[1] == lead_in, (question, titles)
