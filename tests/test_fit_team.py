"""A team refits the ranking model on its own posts: votes in the terminal, `kb feedback export`,
then `eval/fit.py --gold --index`, which cross-validates those posts with the shared real posts
and writes a model the doors use through `KB_RANKER`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, needs_shared

from index.ranker import load_model

# Questions in a team's own words, and the bundled FAQ entry that answers each.
VOTED = (
    (
        "torchrun: port 29500 is taken by another job on the same box",
        "torchrun fails at start with The server socket has failed to listen on any local network "
        "address and Address already in use (port 29500). What is holding the port?",
    ),
    (
        "job dies, log shows exitcode -9 and nothing else, no traceback",
        "A rank dies with exitcode: -9 and Signal 9 (SIGKILL), without any Python error. Who killed it?",
    ),
)
BREAD = "how do I bake sourdough bread at home"
CONFIRMED = "NCCL picks the wrong network card on our nodes, how do I make it use another one?"


def run(args: list[str], home, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KB_HOME": str(home), **env},
        cwd=ROOT,
        timeout=1200,
    )


def team_gold(tmp_path) -> tuple[str, str, object]:
    """The bundled FAQ as the team's index, two 👎 naming the right entry, one question nothing
    answers and one 👍, exported as gold rows."""
    home, index, gold = tmp_path / "home", str(tmp_path / "idx"), str(tmp_path / "team.jsonl")
    assert (
        run(["-m", "kb", "ingest", str(ROOT / "kb" / "data" / "faq"), "--index", index], home).returncode == 0
    )
    for text, right in VOTED:
        voted = run(["-m", "kb", "feedback", "down", text, "--right", right, "--index", index], home)
        assert voted.returncode == 0, voted.stderr
    assert "no entry" in run(["-m", "kb", "ask", BREAD, "--index", index], home).stdout
    assert run(["-m", "kb", "feedback", "up", CONFIRMED, "--index", index], home).returncode == 0
    export = ["-m", "kb", "feedback", "export", "--gold", gold, "--confirmed", "--index", index]
    exported = run(export, home)
    assert (
        "wrote 4 gold rows to " in exported.stdout
        and "(3 from the queue, 1 confirmed with 👍)" in exported.stdout
    )
    return index, gold, home


@pytest.mark.slow
@needs_shared
def test_a_team_refits_on_its_exported_votes_and_the_doors_use_that_model(tmp_path):
    index, gold, home = team_gold(tmp_path)
    out = tmp_path / "models" / "team.json"
    fit = ["eval/fit.py", "--gold", gold, "--index", index, "--out", str(out), "--repeats", "1"]
    fitted = run(fit, home)
    assert fitted.returncode == 0, fitted.stderr[-2000:]

    data = {d["set"]: d for d in load_model(str(out)).meta["data"]}
    assert {"real_dev", "seeds", "team"} <= set(data)
    assert data["team"]["rows"] == 4 and data["team"]["index"] == index
    report = json.loads((out.parent / "fit.json").read_text("utf-8"))
    team = report["team"]["team"]
    # Every team post is scored once per split, by a model of the folds it is not in.
    assert sum(f["queries"] for f in team["folds"]) == 4
    assert sum(f["answerable"] for f in team["folds"]) == 3
    assert team["in_sample"]["queries"] == 4
    assert "| team | 4 |" in (out.parent / "fit.md").read_text("utf-8")
    # The shared posts are still cross-validated and reported as before.
    assert report["cv"]["folds"][0]["overall"]["queries"] > 0

    # A set is known by its file name: a team file may not take one the fit already has.
    clash = tmp_path / "seeds.jsonl"
    clash.write_text(Path(gold).read_text("utf-8"), "utf-8")
    refused = run([*fit[:2], str(clash), *fit[3:]], home)
    assert refused.returncode == 1 and "'seeds' is already in the fit; rename the file" in refused.stderr

    # The doors use the team's model when KB_RANKER names it: the same entry, weighed by other weights.
    search = ["-m", "kb", "search", "--json", VOTED[0][0], "--index", index]
    with_team, shipped = run(search, home, KB_RANKER=str(out)), run(search, home)
    assert with_team.returncode == 0, with_team.stderr
    team_hit, shipped_hit = (json.loads(r.stdout)["hits"][0] for r in (with_team, shipped))
    assert "29500" in team_hit["title"] and team_hit["entry_id"] == shipped_hit["entry_id"]
    assert team_hit["score"] != shipped_hit["score"]
    # ...and says which model answers (an operator switching models can check).
    stats = json.loads(
        run(["-m", "kb", "stats", "--json", "--index", index], home, KB_RANKER=str(out)).stdout
    )
    assert stats["ranker"]["model"] == out.name and stats["ranker"]["fitted_at"]


def test_a_team_fit_says_what_it_is_missing(tmp_path):
    gold = tmp_path / "team.jsonl"
    gold.write_text('{"id": "t1", "query": "q", "expected": []}\n', "utf-8")
    no_out = run(["eval/fit.py", "--gold", str(gold), "--index", str(tmp_path)], tmp_path)
    assert no_out.returncode == 2 and "--gold needs --out" in no_out.stderr
    no_index = run(["eval/fit.py", "--gold", str(gold), "--out", str(tmp_path / "m.json")], tmp_path)
    assert no_index.returncode == 1 and "--gold needs --index" in no_index.stderr
    missing = run(
        [
            "eval/fit.py",
            "--gold",
            str(gold),
            "--index",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "m.json"),
        ],
        tmp_path,
    )
    assert missing.returncode == 1 and "kb ingest PATH --index" in missing.stderr
    assert not (tmp_path / "m.json").exists()
