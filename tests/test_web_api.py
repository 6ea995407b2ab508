"""kb/doors/web (api.py, chat.py) and kb/doors/host: the JSON API over real HTTP (`kb serve` in a subprocess on 127.0.0.1), the body
limits on every route, the server's log, and the renderers the chat page uses (kb/web_page.py).

The server runs on a copy of the seeds index, so the reload test can rebuild it in place.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import HCCL_LINE, NCCL_LINE, assert_same_json, call, kb_server, training_log

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------------------------------------
# A real server
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_index(seeds_index, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("web-index") / "index"
    shutil.copytree(seeds_index, out)
    return out


@pytest.fixture(scope="module")
def gradio_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gradio-tmp")  # where Gradio stores uploads, instead of /tmp/gradio


@pytest.fixture(scope="module")
def server(live_index, gradio_tmp, tmp_path_factory):
    log = tmp_path_factory.mktemp("web-log") / "serve.log"
    with kb_server(live_index, log, env={"GRADIO_TEMP_DIR": str(gradio_tmp)}) as base:
        yield base


# ---------------------------------------------------------------------------------------------
# Happy paths: the shapes are exactly the ones `kb search --json` / `kb ask --json` print
# ---------------------------------------------------------------------------------------------
def test_health_reports_index_stats(server, live_index):
    status, body, _ = call(server, "GET", "/api/health")
    manifest = json.loads((live_index / "manifest.json").read_text())
    assert status == 200 and body["status"] == "ok"
    assert body["entries"] == manifest["counts"]["entries"] > 0
    assert body["languages"] == {"zh": manifest["counts"]["zh"], "en": manifest["counts"]["en"]}
    assert body["embedder"] == manifest["embedder"] and body["built_at"] == manifest["built_at"]
    # A skipped file's reason can name a path outside the docs: the public health says how many.
    assert body["skipped"] == len(manifest["problems"]) and body["warnings"] == len(manifest["warnings"])


def test_search_matches_search_json(server, seeds_kb):
    from kb.schema import search_json

    status, body, _ = call(server, "POST", "/api/search", {"query": HCCL_LINE, "k": 3})
    assert status == 200
    assert_same_json(body, search_json(seeds_kb.search(HCCL_LINE, k=3)))
    assert HCCL_LINE in body["hits"][0]["title"] and not body["no_match"]


def test_ask_noisy_log_matches_ask_json(server, seeds_kb):
    from kb.schema import ask_json

    log = training_log(
        ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', NCCL_LINE]
    )
    status, body, _ = call(server, "POST", "/api/ask", {"query": log})
    assert status == 200
    assert_same_json(body, ask_json(seeds_kb.ask(log)))
    assert body["citations"][0]["title"] == "NCCL error(2)"
    assert body["citations"][0]["doc"].startswith("002_") and body["mode"] == "extractive"


def test_ask_lang_and_commands(server):
    status, en, _ = call(server, "POST", "/api/ask", {"query": HCCL_LINE, "lang": "en"})
    assert status == 200 and en["lang"] == "en"
    assert "export ASCEND_SLOG_PRINT_TO_STDOUT=1" in en["commands"] and en["destructive_commands"] == []
    status, zh, _ = call(server, "POST", "/api/ask", {"query": HCCL_LINE, "lang": "zh"})
    assert status == 200 and zh["lang"] == "zh"
    # The same entry, cited in its Chinese version.
    assert zh["citations"][0]["entry_id"] != en["citations"][0]["entry_id"]
    assert "1343225860" in zh["citations"][0]["title"]


def test_follow_up_keeps_context(server):
    follow_up = "What if I run it inside Docker?"
    _, alone, _ = call(server, "POST", "/api/ask", {"query": follow_up})
    # On its own the follow-up is about Docker in general, not about the HCCL error.
    assert alone["no_match"] or HCCL_LINE not in alone["citations"][0]["title"]
    history = [
        {"role": "user", "content": HCCL_LINE},
        {"role": "assistant", "content": "rank_table.json ..."},
    ]
    status, body, _ = call(server, "POST", "/api/ask", {"query": follow_up, "history": history})
    assert status == 200 and not body["no_match"]
    assert HCCL_LINE in body["citations"][0]["title"]
    # [role, text] pairs are accepted too
    _, pairs, _ = call(server, "POST", "/api/ask", {"query": follow_up, "history": [["user", HCCL_LINE]]})
    assert pairs["citations"][0]["entry_id"] == body["citations"][0]["entry_id"]
    # Small talk and a new question of its own never pull the earlier topic back.
    _, thanks, _ = call(server, "POST", "/api/ask", {"query": "thanks!", "history": history})
    assert thanks["no_match"] and thanks["reply"] and not body["reply"]  # a word back, no search
    new_topic = "How do I set up passwordless SSH login between the nodes?"
    _, other, _ = call(server, "POST", "/api/ask", {"query": new_topic, "history": history})
    assert other["no_match"] or HCCL_LINE not in other["citations"][0]["title"]


def test_entry_json_and_html(server, seeds_kb):
    from kb.schema import entry_json

    _, ask, _ = call(server, "POST", "/api/ask", {"query": HCCL_LINE, "lang": "en"})
    entry_id = ask["citations"][0]["entry_id"]
    e = seeds_kb.entry(entry_id)
    status, body, _ = call(server, "GET", f"/api/entry/{entry_id}")
    assert status == 200 and body == entry_json(e, seeds_kb.entry(e.translation))
    assert body["translation_entry"]["lang"] == "zh"
    status, page, _ = call(server, "GET", f"/entry/{entry_id}?fragment=1")
    assert status == 200 and f"{e.doc}:{e.start_line}-{e.end_line}" in page
    assert 'class="kb-translation"' in page and "export ASCEND_SLOG_PRINT_TO_STDOUT=1" in page
    status, missing, _ = call(server, "GET", "/api/entry/0000000000000000")
    assert status == 404 and "error" in missing


# ---------------------------------------------------------------------------------------------
# Bad requests: a 4xx with a JSON error, never a 500
# ---------------------------------------------------------------------------------------------
BAD = [
    ("POST", "/api/ask", {}, 422, "missing field"),
    ("POST", "/api/search", {"text": "NCCL"}, 422, 'unknown field "text"; this request takes query, k, lang'),
    ("POST", "/api/search", {"query": "NCCL", "top_k": 3}, 422, 'unknown field "top_k"'),  # not 5 hits
    ("POST", "/api/ask", {"query": "NCCL", "k": 3}, 422, "this request takes query, lang, history"),
    ("POST", "/api/ask", {"query": 42}, 422, "must be a string"),
    ("POST", "/api/ask", {"query": ["NCCL"]}, 422, "must be a string"),
    ("POST", "/api/ask", {"query": "   "}, 422, "empty"),
    ("POST", "/api/search", {"query": bytes(range(1, 32)).decode() * 20}, 422, "looks like binary data"),
    ("POST", "/api/search", {"query": "NCCL", "k": "3"}, 422, '"k"'),
    ("POST", "/api/search", {"query": "NCCL", "k": 0}, 422, '"k"'),
    ("POST", "/api/search", {"query": "NCCL", "k": True}, 422, '"k"'),
    ("POST", "/api/ask", {"query": "NCCL", "lang": "fr"}, 422, '"lang"'),
    ("POST", "/api/ask", {"query": "NCCL", "history": "earlier"}, 422, '"history"'),
    ("POST", "/api/ask", {"query": "NCCL", "history": [{"role": "bot", "content": "x"}]}, 422, "history[0]"),
    ("POST", "/api/ask", b'{"query": "NCCL"', 400, "not valid JSON"),
    ("POST", "/api/ask", b"\xff\xfe\x00garbage", 400, "not valid JSON"),
    ("POST", "/api/search", b'["NCCL"]', 400, "JSON object"),
    ("POST", "/api/search", b"", 400, "empty request body"),
    ("GET", "/api/ask", None, 405, "takes POST"),
    ("DELETE", "/api/search", None, 405, "takes POST"),
    ("GET", "/api/nothing-here", None, 404, "no API endpoint"),
    ("GET", "/api/entry/", None, 404, "no API endpoint"),
    ("POST", "/api/entry/abc", None, 405, "takes GET"),
    ("GET", "/api/entry/a/b", None, 404, "no entry 'a/b'"),  # an id with a slash: no such entry, not 405
    ("GET", "/api/entry/a%2Fb", None, 404, "no entry 'a/b'"),
    ("PUT", "/api/entry/a/b", None, 405, "takes GET, not PUT"),
]


@pytest.mark.parametrize(
    "method,path,body,status,message", BAD, ids=[f"{b[0]}-{b[1]}-{b[3]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_request(server, method, path, body, status, message):
    raw = body if isinstance(body, bytes) else None
    got, payload, _ = call(server, method, path, body=None if raw is not None else body, raw=raw)
    assert got == status, payload
    assert isinstance(payload, dict) and message in payload["error"] and payload["status"] == status


def raw_request(base: str, path: str, head: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
    """POST over a bare socket that stops after `body` (which may be less than declared) and
    reads the answer: a server that refuses early answers before the rest would arrive."""
    host, port = base.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    head = {"Content-Type": "application/json", **head}
    lines += [f"{k}: {v}" for k, v in head.items()]
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        resp = http.client.HTTPResponse(s)
        resp.begin()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


def raw_post(base: str, path: str, head: dict[str, str], body: bytes) -> tuple[int, dict]:
    status, _, data = raw_request(base, path, head, body)
    return status, json.loads(data)


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def multipart(name: str, content: bytes, boundary: str = "kbtestboundary") -> tuple[dict, bytes]:
    """Headers and body of a one-file upload, as the chat's upload route takes it."""
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(len(body)),
    }, body


def test_oversized_bodies_are_refused(server):
    from kb.doors.host.app import BODY_HEADROOM, JSON_ESCAPE_FACTOR

    limit = 2 * 1024 * 1024  # settings.max_query_bytes by default
    body_limit = JSON_ESCAPE_FACTOR * limit + BODY_HEADROOM  # a query's route: the limit, escaped

    # Refused on the declared length, before the body is read.
    status, body = raw_post(
        server, "/api/ask", {"Content-Length": str(body_limit + 1)}, b'{"query": "' + b"x" * 65536
    )
    assert status == 413 and f"the limit is {body_limit}" in body["error"]

    # Chunked upload, no length declared: counted as it streams in, refused once over the limit.
    chunk = b"x" * 65536
    pieces = [b'{"query": "'] + [chunk] * (body_limit // len(chunk) + 4)
    status, body = raw_post(server, "/api/search", {"Transfer-Encoding": "chunked"}, chunked(*pieces))
    assert status == 413 and "limit" in body["error"]

    # A chunked body under the limit reaches the route whole.
    status, body = raw_post(
        server,
        "/api/search",
        {"Transfer-Encoding": "chunked"},
        chunked(b'{"query": "Init plugin', b' so failed"}'),
    )
    assert status == 200 and HCCL_LINE in body["hits"][0]["title"]

    # A query just over the limit inside a body the server still reads: the query limit answers.
    status, body, _ = call(server, "POST", "/api/search", {"query": "y" * (limit + 1)})
    assert status == 413 and "KB_MAX_QUERY_BYTES" in body["error"]

    # The limit is the query's, as decoded: a 1.5 MB Chinese log sent with every character
    # escaped (`\u4e2d`, as Python's json.dumps does) is a 3 MB body, and it is answered.
    line = "训练时第 3 步报错，请帮忙看看日志里的问题\n"
    log = line * (1_500_000 // len(line.encode())) + "Init plugin so failed, ret = 1343225860\n"
    assert len(log.encode()) < limit < len(json.dumps({"query": log}))
    status, body, _ = call(server, "POST", "/api/search", {"query": log})
    assert status == 200 and HCCL_LINE in body["hits"][0]["title"]

    status, health, _ = call(server, "GET", "/api/health")  # and the server is still fine
    assert status == 200 and health["status"] == "ok"


def test_the_chat_routes_have_the_same_body_limit(server):
    """Gradio's own routes (queue, upload) are bounded like the API: 413 JSON before reading."""
    from kb.doors.host.app import BODY_HEADROOM, CHAT_QUEUE_PATH
    from kb.query import MAX_PASTE_BYTES

    limit = 2 * 1024 * 1024 + 64 * 1024  # max_query_bytes + BODY_HEADROOM
    chat = 2 * MAX_PASTE_BYTES + BODY_HEADROOM  # the chat's queue takes a whole log, JSON-escaped
    for path in (CHAT_QUEUE_PATH, "/gradio_api/upload", "/slack/events", "/"):
        most = chat if path == CHAT_QUEUE_PATH else limit
        status, body = raw_post(server, path, {"Content-Length": str(most + 1)}, b"x" * 65536)
        assert status == 413 and f"the limit is {most}" in body["error"], path
    status, body = raw_post(
        server, "/gradio_api/upload", {"Transfer-Encoding": "chunked"}, chunked(*[b"x" * 65536] * 40)
    )
    assert status == 413 and "over the limit" in body["error"]

    # A client that sends all of a refused body before it reads still gets the 413 (the server
    # drops the rest instead of resetting the connection under it), and the connection closes.
    conn = http.client.HTTPConnection(*server.removeprefix("http://").split(":"), timeout=60)
    conn.request("POST", "/api/search", b"{" + b" " * (7 * limit) + b"}")  # over the escaped limit
    resp = conn.getresponse()
    assert resp.status == 413 and resp.getheader("connection") == "close"
    assert "limit" in json.loads(resp.read())["error"]
    conn.close()
    assert call(server, "GET", "/api/health")[0] == 200


def test_uploads_are_refused_and_nothing_is_stored(server, gradio_tmp):
    """The chat takes no files: Gradio's upload route answers 404 whatever the size (it used to
    store anything under the query limit; see also tests/test_security_web.py)."""
    limit = 2 * 1024 * 1024
    stored = lambda: sorted(p.name for p in gradio_tmp.rglob("*"))  # noqa: E731
    before = stored()
    for name, data in (("big.log", b"x" * (limit + 1)), ("small.log", b"NCCL error(2)\n")):
        head, body = multipart(name, data)
        status, _, text = raw_request(server, "/gradio_api/upload", head, body)
        assert status == 404 and b"no file uploads" in text, name
    assert stored() == before


def test_head_is_answered_where_get_is(server):
    conn = http.client.HTTPConnection(*server.removeprefix("http://").split(":"), timeout=60)
    try:
        for path, status in (
            ("/api/health", 200),
            ("/api/entry/0000000000000000", 404),
            ("/api/nothing", 404),
        ):
            conn.request("HEAD", path)
            resp = conn.getresponse()
            assert resp.status == status and resp.read() == b"", path
    finally:
        conn.close()


def test_serve_logs_llm_failures_without_the_key(seeds_index, tmp_path):
    """`kb serve` configures logging: a failing model shows in its output (kb.llm at WARNING),
    the request log of httpx does not, and no line holds the key."""
    from openai_stub import closed_port_url

    pytest.importorskip("langchain_openai", reason="needs the llm extra")
    key = "sk-kbtest-" + os.urandom(12).hex()
    env = {
        "KB_LLM_MODEL": "stub-model",
        "KB_LLM_BASE_URL": closed_port_url(),
        "KB_LLM_MAX_RETRIES": "0",
        "OPENAI_API_KEY": key,
    }
    log = tmp_path / "serve.log"
    with kb_server(seeds_index, log, env=env) as base:
        status, body, _ = call(base, "POST", "/api/ask", {"query": HCCL_LINE})
        assert status == 200 and body["mode"] == "extractive" and "could not be reached" in body["notice"]
        deadline = time.monotonic() + 10
        while "LLM answer failed" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    text = log.read_text()
    assert "WARNING kb.llm: LLM answer failed" in text, text[-2000:]
    assert key not in text and key[-12:] not in text
    assert "HTTP Request:" not in text  # httpx's INFO lines stay out


def test_rebuilt_index_is_picked_up_without_restart(server, live_index):
    from kb.indexing import ingest

    _, before, _ = call(server, "GET", "/api/health")
    manifest = json.loads((live_index / "manifest.json").read_text())
    ingest(manifest["sources"], live_index)  # what `kb ingest --index DIR` does, beside the live server
    generation = json.loads((live_index / "manifest.json").read_text())["generation"]
    assert generation != before["generation"]
    deadline = time.monotonic() + 30  # the server looks at most every RELOAD_CHECK_S (5 s)
    while time.monotonic() < deadline:
        status, health, _ = call(server, "GET", "/api/health")
        assert status == 200  # serving all along
        if health["generation"] == generation:
            break
        time.sleep(0.5)
    assert health["generation"] == generation
    status, body, _ = call(server, "POST", "/api/search", {"query": HCCL_LINE})
    assert status == 200 and HCCL_LINE in body["hits"][0]["title"]


def test_concurrent_requests_share_one_kb(server):
    from concurrent.futures import ThreadPoolExecutor

    queries = [HCCL_LINE, NCCL_LINE, "域名映射怎么配置", "how do I bake a chocolate cake"]
    serial = {q: call(server, "POST", "/api/ask", {"query": q})[1] for q in queries}
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda q: (q, call(server, "POST", "/api/ask", {"query": q})), queries * 4))
    for q, (status, body, _) in results:
        assert status == 200 and body == serial[q]


def test_serve_refuses_a_busy_port_before_loading(seeds_index):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cmd = [sys.executable, "-m", "kb", "serve", "--index", str(seeds_index), "--port", str(port)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "pick another port with --port" in run.stderr


def test_slack_flag_without_the_slack_door_is_a_clear_error(seeds_kb, monkeypatch):
    from kb.doors.host.app import _mount_slack
    from kb.errors import KbError

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "test-secret")
    monkeypatch.setitem(sys.modules, "slack_bolt", None)  # as if the slack extra were not installed
    with pytest.raises(KbError, match=r"pip install 'bilingual-kb\[slack"):
        _mount_slack(object(), seeds_kb)


# ---------------------------------------------------------------------------------------------
# Renderers used by the chat page (no server needed)
# ---------------------------------------------------------------------------------------------
