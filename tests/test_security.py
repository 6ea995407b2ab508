"""Security and dependency faults (docs/reliability.md, cases 5 and 6).

A real `kb serve` on 127.0.0.1 holds an index with a FAQ full of HTML and `<script>`, with an
LLM configured at a local OpenAI-compatible stub that fails in every way (tests/openai_stub.py)
and with fake secrets in its environment. Slack faults use the local Slack Web API stand-in
(tests/slack_stub.py) with the bot in HTTP mode. No secret may appear in any response or log.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NCCL_Q, SECRETS, assert_no_secret
from helpers import kb_serve, post_json, raw
from openai_stub import OpenAIStub, Reply, closed_port_url

pytestmark = pytest.mark.slow
needs_llm = pytest.mark.skipif(
    importlib.util.find_spec("langchain_openai") is None,
    reason="needs the llm extra: pip install 'bilingual-kb[llm]'",
)


# -- fixtures ------------------------------------------------------------------------------------


def llm_reply(request) -> Reply:
    """The stub fails the way the question asks it to."""
    asked = request.prompt_text
    if "[llm-500]" in asked:
        return Reply(status=500)
    if "[llm-401]" in asked:
        return Reply(status=401)
    if "[llm-slow]" in asked:
        return Reply("The shared memory is too small [1].", delay_s=4)
    return Reply(raw=b"<html><body>502 Bad Gateway</body></html>")  # garbage


@pytest.fixture(scope="module")
def llm_stub():
    with OpenAIStub(respond=llm_reply) as stub:
        yield stub


@pytest.fixture(scope="module")
def server(evil_index, llm_stub, tmp_path_factory):
    env = {
        **SECRETS,
        "KB_LLM_MODEL": "stub-model",
        "KB_LLM_BASE_URL": llm_stub.base_url,
        "KB_LLM_TIMEOUT_S": "1",
        "KB_LLM_MAX_RETRIES": "0",
        "GRADIO_TEMP_DIR": str(tmp_path_factory.mktemp("gradio-tmp")),  # uploads land here, not in /tmp
    }
    with kb_serve(evil_index, tmp_path_factory.mktemp("security-log") / "serve.log", env=env) as srv:
        yield srv


def evil_entry(kb):
    return next(e for e in kb.index.entries if e.doc == "evil.md")


# -- 6. binds 127.0.0.1 unless told otherwise ------------------------------------------------------
def listening_addresses(port: int) -> list[str]:
    """Local addresses of the LISTEN sockets on `port`, from /proc/net/tcp and tcp6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            addr, lport = cols[1].split(":")
            if cols[3] == "0A" and int(lport, 16) == port:  # 0A: LISTEN
                if len(addr) == 8:
                    found.append(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    found.append("ipv6:" + addr)
    return found


def test_kb_serve_listens_on_loopback_only(server):
    assert listening_addresses(server.port) == ["127.0.0.1"]


def test_every_door_defaults_to_loopback_and_warns_when_exposed(capsys):
    import inspect

    from kb.doors.cli import build_parser
    from kb.doors.host.app import announce, bind_address
    from kb.doors.host.server import Served

    parser = build_parser()
    assert bind_address(parser.parse_args(["serve"]), 7860) == ("127.0.0.1", 7860)
    assert bind_address(parser.parse_args(["slack"]), 3000) == ("127.0.0.1", 3000)
    assert inspect.signature(Served).parameters["host"].default == "127.0.0.1"
    # Told otherwise, it says so loudly.
    announce("0.0.0.0", 7860)
    assert "reachable from the network, without authentication" in capsys.readouterr().err
    announce("127.0.0.1", 7860)
    assert "reachable from the network" not in capsys.readouterr().err


def test_no_secret_in_any_response_or_in_the_server_log(server):
    for path in ("/api/health", "/", "/config", "/gradio_api/info", "/api/nothing"):
        status, _, body = raw(server.port, "GET", path)
        assert status < 500, (path, status)
        assert_no_secret(body, path)
    status, body = post_json(server.port, "/api/ask", {"query": f"{NCCL_Q} [llm-500]", "history": "x"})
    assert status == 422
    assert_no_secret(json.dumps(body), "an error response")
    assert_no_secret(server.log.read_text(), "the server log")


@needs_llm
@pytest.mark.parametrize("marker", ["[llm-500]", "[llm-401]", "[llm-garbage]", "[llm-slow]", "down"])
def test_llm_failures_are_logged_without_the_key(evil_kb, llm_stub, monkeypatch, caplog, marker):
    """What a server that logs at DEBUG would write (kb.llm, openai, httpx): the failure, not the key."""
    from kb.config import LlmSettings
    from kb.llm import llm_answer

    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    base_url = closed_port_url() if marker == "down" else llm_stub.base_url
    llm = LlmSettings(model="stub-model", base_url=base_url, timeout_s=1.0, max_retries=0)
    with caplog.at_level("DEBUG"):
        answer = llm_answer(evil_kb.search(f"{NCCL_Q} {marker}"), llm)
    assert answer.mode == "extractive" and answer.notice
    assert "LLM answer failed" in caplog.text
    assert_no_secret(caplog.text + answer.notice, f"the log of a failing LLM call ({marker})")


@needs_llm
def test_cli_with_the_llm_down_answers_and_does_not_echo_the_key(evil_index):
    env = {**os.environ, **SECRETS, "KB_LLM_MODEL": "stub-model", "KB_LLM_BASE_URL": closed_port_url()}
    for extra in ((), ("--json",)):
        p = subprocess.run(
            [sys.executable, "-m", "kb", "ask", NCCL_Q, "--index", str(evil_index), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        assert "could not be reached" in p.stdout and "--shm-size 32G" in p.stdout
        assert_no_secret(p.stdout + p.stderr, "kb ask output")


# -- 6. the page shows document HTML as text -----------------------------------------------------------
def test_faq_html_is_text_in_the_json_api_and_escaped_in_the_entry_panel(server, evil_kb):
    e = evil_entry(evil_kb)
    assert "<script>alert('faq')</script>" in e.body  # the document really holds it

    status, headers, body = raw(server.port, "GET", f"/api/entry/{e.id}")
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert "<script>alert('faq')</script>" in json.loads(body)["body"]  # a JSON string: data, not markup

    for path in (f"/entry/{e.id}?fragment=1", f"/entry/{e.id}"):
        status, headers, body = raw(server.port, "GET", path)
        page = body.decode()
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert "<script" not in page and "<img" not in page and 'href="javascript:' not in page, path
        assert "&lt;script&gt;alert(" in page and "NCCL_IB_HCA=mlx5" in page
        assert "<b>mlx5</b>" not in page


def test_injection_in_a_query_comes_back_as_text_and_renders_escaped(server, evil_kb):
    from kb.doors.web.render import render_answer, render_user

    query = "<script>alert(document.cookie)</script> NCCL_IB_HCA warning mlx5 in the log [llm-500]"
    status, body = post_json(server.port, "/api/search", {"query": query})
    assert status == 200 and body["query"] == query  # echoed verbatim inside JSON
    assert body["hits"][0]["doc"] == "evil.md"
    # The chat shows the question and the answer (whose source holds <script>) as text.
    shown = render_user(query, "en") + render_answer(evil_kb.ask(query.replace(" [llm-500]", "")))
    assert "<script" not in shown and "&lt;script&gt;" in shown


# -- 6. no path traversal through a parameter that names a document ------------------------------------
TRAVERSALS = [
    "/api/entry/../../etc/passwd",
    "/api/entry/..%2F..%2F..%2Fetc%2Fpasswd",
    "/api/entry/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/api/entry/..%252F..%252Fetc%252Fpasswd",
    "/api/entry/%2Fetc%2Fpasswd",
    "/api/entry/..%2Fmanifest.json",
    "/api/entry/%00",
    "/entry/../../../etc/passwd",
    "/entry/..%2F..%2F..%2Fetc%2Fpasswd?fragment=1",
    "/entry/..%2Fmanifest.json?fragment=1",
    "/gradio_api/file=/etc/passwd",
    "/gradio_api/file=../../../../etc/passwd",
    "/gradio_api/file=%2Fetc%2Fpasswd",
    "/file=/etc/passwd",
    "/static/../../../../etc/passwd",
    "/assets/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_path_traversal(server, evil_index, path):
    status, _, body = raw(server.port, "GET", path)
    text = body.decode("utf-8", "replace")
    assert 400 <= status < 500, (path, status, text[:200])
    assert "root:" not in text and '"generation"' not in text, (path, text[:200])


def test_entry_lookup_is_by_id_not_by_path(server, evil_kb):
    """The only document-naming parameter is an entry id, looked up in the loaded index."""
    e = evil_entry(evil_kb)
    for name in (e.doc, f"../{e.doc}", str(Path(e.doc).resolve())):
        status, _, _ = raw(server.port, "GET", "/api/entry/" + name.replace("/", "%2F"))
        assert status >= 400
    assert raw(server.port, "GET", f"/api/entry/{e.id}")[0] == 200


# -- 6. request body size limits ------------------------------------------------------------------------
# The JSON API's limits (declared length, chunked uploads, query bytes) are proven in
# tests/test_web_api.py::test_oversized_bodies_are_refused; the Slack door's below.


def test_the_chat_refuses_large_uploads(server):
    boundary = "kbtestboundary"
    payload = b"x" * (8 * 1024 * 1024)
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="big.log"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + payload
        + f"\r\n--{boundary}--\r\n".encode()
    )
    status, _, _ = raw(
        server.port,
        "POST",
        "/gradio_api/upload",
        body,
        {"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert status == 413


def test_the_chat_refuses_oversized_bodies(server):
    # The chat's queue takes a whole log (24 MB, JSON-escaped: kb/doors/host/app.py); more is refused.
    body = json.dumps(
        {"data": ["x" * (50 * 1024 * 1024), [], [], "auto"], "fn_index": 0, "session_hash": "s"}
    )
    status, _, _ = raw(
        server.port, "POST", "/gradio_api/queue/join", body.encode(), {"Content-Type": "application/json"}
    )
    assert status == 413


# -- Slack: signature verification, body limit, 5xx from the Slack API -----------------------------------


def test_secret_mask_hides_secrets_in_messages_and_tracebacks():
    import logging

    from kb.doors.host.logs import SecretMask

    secret = "xoxb-" + os.urandom(10).hex()
    fmt = SecretMask("%(levelname)s %(message)s", [secret, secret[:12]])
    try:
        raise RuntimeError(f"Authorization: Bearer {secret}")
    except RuntimeError:
        record = logging.LogRecord("kb.x", logging.ERROR, __file__, 1, "token %s", (secret,), sys.exc_info())
    text = fmt.format(record)
    assert secret not in text and secret[:12] not in text
    assert text.startswith("ERROR token [redacted]") and "Bearer [redacted]" in text
