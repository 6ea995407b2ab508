"""The MCP door (kb/doors/mcp/) with the official SDK's own client: in memory, over real
streamable HTTP (`kb mcp --http` as a user starts it, and mounted in `kb serve --mcp`), and over
stdio (`kb mcp`, as an agent starts it). Retrieval is real: the seeds index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager

import anyio
import pytest
from conftest import ROOT
from helpers import NCCL_LINE, assert_same_json, call, stderr_lines, training_log, wait_for_line

from kb.doors.host.live import LiveKb
from kb.feedback import MAX_COMMENT_CHARS, FeedbackStore
from kb.schema import ask_json, entry_json, search_json

mcp = pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'bilingual-kb[mcp]'")
pytestmark = pytest.mark.slow

TOOLS = {"search", "ask", "get_entry", "feedback"}
CHINESE = "使用OpenMPI多机多卡训练时，如何指定网卡？"
BREAD = "How do I bake sourdough bread with rye flour?"


def one_megabyte_log() -> str:
    """A 1 MB training log with the NCCL error at its end."""
    key = ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', NCCL_LINE]
    text = training_log(key, n=13_500, seed=11)
    assert len(text.encode()) >= 1_000_000, len(text.encode())
    return text


def oversize(settings) -> str:
    return "x" * (settings.max_query_bytes + 10)


def payload(result) -> dict:
    """A tool result's JSON, checked to be the same as structured content and as text."""
    assert result.content and result.content[0].type == "text"
    text = json.loads(result.content[0].text)
    if not result.is_error:
        assert result.structured_content == text
    return text


async def exercise(client, kb) -> dict:
    """List the tools, call each one, a Chinese question, a 1 MB paste, an oversize one; the
    results by name, each checked against what the knowledge base itself answers."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert not any(t.annotations.destructive_hint for t in tools.values())
    # Only feedback writes (a vote in the store); the rest only read.
    assert [n for n, t in tools.items() if not t.annotations.read_only_hint] == ["feedback"]
    assert tools["search"].input_schema["required"] == ["query"]
    out: dict = {}
    search = payload(await client.call_tool("search", {"query": NCCL_LINE, "k": 3}))
    assert_same_json(search, search_json(kb.search(NCCL_LINE, 3)))  # floats: last-bit noise between processes
    assert search["match"] == "match"
    assert search["hits"][0]["title"] == "NCCL error(2)" and len(search["hits"]) == 3
    ask = payload(await client.call_tool("ask", {"query": NCCL_LINE}))
    assert_same_json(ask, ask_json(kb.ask(NCCL_LINE)))
    assert ask["citations"][0]["title"] == "NCCL error(2)"
    entry_id = ask["citations"][0]["entry_id"]
    got = payload(await client.call_tool("get_entry", {"entry_id": entry_id}))
    e = kb.entry(entry_id)
    assert got == entry_json(e, kb.entry(e.translation) if e.translation else None)
    zh = payload(await client.call_tool("ask", {"query": CHINESE}))
    assert_same_json(zh, ask_json(kb.ask(CHINESE)))
    assert zh["lang"] == "zh" and zh["match"] in ("match", "weak")
    big = payload(await client.call_tool("ask", {"query": one_megabyte_log()}))
    assert big["match"] == "match" and big["citations"][0]["title"] == "NCCL error(2)"
    refused = await client.call_tool("ask", {"query": oversize(kb.settings)})
    out["refused"] = refused
    assert refused.is_error and payload(refused)["status"] == 413
    assert (
        "KB_MAX_QUERY_BYTES" in payload(refused)["error"] and "part of the log" in payload(refused)["error"]
    )
    # The entry named by the citation an answer prints (doc:start-end, or a line inside it).
    place = f"{e.doc}:{e.start_line}-{e.end_line}"
    assert payload(await client.call_tool("get_entry", {"entry_id": place}))["id"] == entry_id
    inside = payload(await client.call_tool("get_entry", {"entry_id": f"{e.doc}:{e.end_line}"}))
    assert inside["id"] == entry_id
    for name in ("no-such-entry", f"{e.doc}:99999", e.title):  # a title is not a name here
        missing = await client.call_tool("get_entry", {"entry_id": name})
        assert missing.is_error and payload(missing) == {
            "error": f"no entry {name!r} in the index (give an entry_id from search or ask, or its doc:start-end)",
            "status": 404,
        }
    misspelt = await client.call_tool("serch", {"query": NCCL_LINE})
    assert misspelt.is_error and payload(misspelt) == {
        "error": "unknown tool 'serch' (this server has: ask, feedback, get_entry, search)",
        "status": 404,
    }
    bad_k = await client.call_tool("search", {"query": NCCL_LINE, "k": 99})
    assert bad_k.is_error and payload(bad_k)["status"] == 422 and '"k"' in payload(bad_k)["error"]
    await refuses_arguments_as_the_api_does(client)
    empty = await client.call_tool("search", {"query": "   "})
    assert empty.is_error and "the query is empty" in payload(empty)["error"]
    binary = await client.call_tool("ask", {"query": bytes(range(1, 32)).decode() * 20})  # a file's bytes
    assert binary.is_error and "looks like binary data" in payload(binary)["error"]
    out["gap"] = payload(await client.call_tool("ask", {"query": BREAD}))
    out["entry_id"] = entry_id
    return out


async def refuses_arguments_as_the_api_does(client) -> None:
    """A wrong type, a wrong value and an unknown field are all the API's 422 JSON (an agent reads
    one shape); the SDK's pydantic text and silently dropped fields are not seen."""
    wrong_calls = [
        ("search", {"query": NCCL_LINE, "k": True}, '"k"'),
        ("search", {"query": NCCL_LINE, "k": "5"}, '"k"'),
        ("search", {"query": 123}, '"query"'),
        ("search", {"query": NCCL_LINE, "top_k": 3}, 'unknown field "top_k"'),
        ("ask", {"query": NCCL_LINE, "history": "prev"}, '"history"'),
        ("ask", {"query": NCCL_LINE, "lang": "fr"}, '"lang"'),
        ("feedback", {"query": NCCL_LINE}, '"vote"'),
    ]
    for tool, args, field in wrong_calls:
        result = await client.call_tool(tool, args)
        error = payload(result)
        assert result.is_error and error["status"] == 422 and field in error["error"], (tool, args, error)
        assert "pydantic" not in error["error"]
    schema = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
    assert schema["feedback"]["vote"]["enum"] == ["up", "down"]  # what an agent can send, said up front
    assert schema["search"]["k"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 50}


@pytest.fixture
def store(tmp_path):
    return FeedbackStore(tmp_path / "feedback.sqlite3")


def test_in_memory_client_lists_and_calls_every_tool(seeds_kb, store):
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from kb.doors.mcp.server import build_server

    server = build_server(LiveKb(seeds_kb), store)

    async def main():
        async with Client(server) as client:
            out = await exercise(client, seeds_kb)
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["faq://{entry_id}"]
            read = await client.read_resource(f"faq://{out['entry_id']}")
            text = read.contents[0].text
            assert text.startswith("# NCCL error(2)\n") and "002_1ad754c4b0581e45.txt:623-629" in text
            with pytest.raises(MCPError, match="no entry 'nope' in the index"):
                await client.read_resource("faq://nope")
            return out

    out = anyio.run(main)
    assert out["gap"]["match"] == "none" and out["gap"]["citations"] == []
    # The "no match" went to the unanswered queue like any door's; answered questions did not.
    assert [(r.door, r.query, r.match) for r in store.rows(queue=True)] == [("mcp", BREAD, "none")]


async def vote_as_an_agent(client, kb) -> list[dict]:
    """An agent tried two answers: the first fixed the error, the second did not and another
    entry did (its answer passed as JSON text, as some clients do). Then six votes refused."""
    fixed = payload(await client.call_tool("ask", {"query": NCCL_LINE}))
    up = {"query": NCCL_LINE, "vote": "up", "answer": fixed, "comment": "NCCL_SOCKET_IFNAME=eth0 fixed it"}
    gap = payload(await client.call_tool("ask", {"query": BREAD}))
    right = fixed["citations"][0]["entry_id"]
    # Named by the resource URI this server gives out for the entry.
    down = {"query": BREAD, "vote": "down", "answer": json.dumps(gap), "right_entry": f"faq://{right}"}
    votes = [payload(await client.call_tool("feedback", args)) for args in (up, down)]
    refusals = {
        'field "vote"': {"query": NCCL_LINE, "vote": "maybe"},
        'field "answer"': {"query": CHINESE, "vote": "up", "answer": fixed},  # another question's answer
        'field "right_entry"': {"query": NCCL_LINE, "vote": "down", "right_entry": "no such entry at all"},
        'field "lang"': {
            "query": NCCL_LINE,
            "vote": "up",
            "lang": "fr",
            "comment": "x" * (MAX_COMMENT_CHARS + 1),
        },
        "it must be the JSON object": {"query": NCCL_LINE, "vote": "up", "answer": "not JSON {"},
        "KB_MAX_QUERY_BYTES": {"query": oversize(kb.settings), "vote": "down"},
    }
    for words, args in refusals.items():
        refused = await client.call_tool("feedback", args)
        assert refused.is_error and words in payload(refused)["error"], (words, payload(refused))
    return votes


def test_an_agent_says_whether_an_answer_worked(seeds_kb, store):
    from mcp import Client

    from kb.doors.mcp.server import build_server

    async def main():
        async with Client(build_server(LiveKb(seeds_kb), store)) as client:
            return await vote_as_an_agent(client, seeds_kb)

    up, down = anyio.run(main)
    assert (up["vote"], up["in_queue"], up["shown"]["match"]) == ("up", False, "match")
    assert (down["vote"], down["in_queue"], down["shown"]["match"]) == ("down", True, "none")
    assert down["right_entry"]["title"] == "NCCL error(2)"  # the agent sees what its name resolved to
    rows = {r.query: r for r in store.rows()}
    assert set(rows) == {NCCL_LINE, BREAD}  # the refused votes stored nothing
    assert rows[NCCL_LINE].door == "mcp" and rows[NCCL_LINE].comment == "NCCL_SOCKET_IFNAME=eth0 fixed it"
    assert rows[NCCL_LINE].shown[0]["title"] == "NCCL error(2)"
    assert rows[BREAD].right["title"] == "NCCL error(2)" and rows[BREAD].in_queue

    async def turned_off():
        async with Client(build_server(LiveKb(seeds_kb), None)) as client:
            return await client.call_tool("feedback", {"query": NCCL_LINE, "vote": "up"})

    off = anyio.run(turned_off)
    assert off.is_error and payload(off)["status"] == 503 and "feedback = false" in payload(off)["error"]


@contextmanager
def kb_mcp_http(index, home):
    """`kb mcp --http` on a free port, as a user starts it; yields the MCP URL."""
    env = {**os.environ, "KB_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    args = ["mcp", "--http", "--port", "0", "--index", str(index)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kb", *args], env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    lines = stderr_lines(proc)
    try:
        yield wait_for_line(proc, lines, r"streamable HTTP at (http://\S+/mcp)", 120).group(1)
    finally:
        proc.terminate()
        proc.wait(30)
    assert "Traceback" not in "".join(lines), "".join(lines)


def test_streamable_http_lists_calls_and_refuses_what_is_too_big(seeds_index, seeds_kb, tmp_path):
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from kb.doors.host.app import body_limit

    with kb_mcp_http(seeds_index, tmp_path / "home") as url:

        async def main():
            async with Client(url) as client:
                out = await exercise(client, seeds_kb)
                # A body over the server's limit never reaches the tool: the client still gets a
                # clear error (a JSON-RPC error with the limit), not "Server returned an error".
                huge = "y" * (body_limit(seeds_kb.settings) + 1)
                with pytest.raises(MCPError, match=r"the request body is \d+ bytes; the limit is \d+"):
                    await client.call_tool("ask", {"query": huge})
                assert payload(await client.call_tool("search", {"query": NCCL_LINE}))["match"] == "match"
                return out

        out = anyio.run(main)
    assert out["gap"]["no_match"] is True
    rows = FeedbackStore(tmp_path / "home" / "feedback.sqlite3").rows(queue=True)
    assert [(r.door, r.query) for r in rows] == [("mcp", BREAD)]


def test_mounted_in_kb_serve_beside_the_chat_and_api(seeds_kb, tmp_path, monkeypatch):
    from mcp import Client

    from kb.doors.host.app import create_app
    from kb.doors.host.server import Served

    # The chat is built in this process: its files go here, and the variable goes with the test.
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    served = Served(create_app(seeds_kb, mcp=True)).start()
    base = f"http://127.0.0.1:{served.address[1]}"
    try:

        async def main():
            async with Client(base + "/mcp") as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                result = payload(await client.call_tool("search", {"query": CHINESE}))
                assert_same_json(result, search_json(seeds_kb.search(CHINESE)))

        anyio.run(main)
        assert call(base, "GET", "/api/health")[0] == 200
        status, page, _ = call(base, "GET", "/")
        assert status == 200 and "<html" in page.lower()  # the chat still answers at /
        # The host's guard covers /mcp too: another site's page cannot post to it.
        status, body, _ = call(base, "POST", "/mcp", body={}, headers={"Origin": "http://evil.example"})
        assert status == 403
        # Stateless: no event stream to hold open (511 idle ones once took every slot of the host).
        status, body, headers = call(base, "GET", "/mcp", headers={"Accept": "text/event-stream"})
        assert status == 405 and headers["Allow"] == "POST" and "stateless" in body["error"]["message"]
    finally:
        served.stop()


def test_stdio_as_an_agent_starts_it(seeds_index, seeds_kb, tmp_path):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kb", "mcp", "--index", str(seeds_index)],
        env={**os.environ, "KB_HOME": str(tmp_path / "home")},
        cwd=str(ROOT),
    )

    async def main():
        async with Client(params, read_timeout_seconds=120) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            answer = payload(await client.call_tool("ask", {"query": CHINESE}))
            vote = {"query": CHINESE, "vote": "up", "answer": answer}
            return answer, payload(await client.call_tool("feedback", vote))

    answer, vote = anyio.run(main)
    assert_same_json(answer, ask_json(seeds_kb.ask(CHINESE)))
    rows = FeedbackStore(tmp_path / "home" / "feedback.sqlite3").rows()
    assert [(r.id, r.door, r.query, r.vote) for r in rows] == [(vote["id"], "mcp", CHINESE, "up")]


def test_cli_help_and_kb_mcp_help_import_no_sdk():
    code = (
        "import sys\nfrom kb.doors.cli import main\n"
        "for argv in (['--help'], ['mcp', '--help'], ['feedback', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print([m for m in ('mcp', 'langchain_core', 'gradio', 'slack_bolt', 'numpy') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "--http" in out.stdout and "export" in out.stdout


def test_the_instructions_describe_the_index_the_server_answers_from(seeds_kb, tmp_path):
    """An agent routes questions by the server's instructions: a team's own index is described by
    its documents, not by the bundled knowledge base's topics."""
    from mcp import Client

    from kb.doors.mcp.server import BUNDLED_TOPICS, build_server, instructions
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "gloo.md").write_text(
        "# Gloo on our cluster\n\n## Q: connectFullMesh failed?\n\nA: Open the ports.\n"
    )
    (docs / "slurm_jobs.md").write_text(
        "## Q: srun: Invalid partition name specified?\n\nA: Run `sinfo -s`.\n"
    )
    ingest([str(docs)], tmp_path / "index")
    team = KnowledgeBase.open(index=str(tmp_path / "index"))

    async def main():
        async with Client(build_server(LiveKb(team))) as client:
            return client.instructions

    said = anyio.run(main)
    assert BUNDLED_TOPICS not in said and "MindSpore" not in said
    assert "2 FAQ entries (0 in Chinese, 2 in English)" in said and "Gloo on our cluster, slurm_jobs" in said
    assert "`ask` answers" in said  # how to use the tools, as for any index
    assert BUNDLED_TOPICS not in instructions(seeds_kb)  # the seeds are not the bundled documents
