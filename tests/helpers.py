"""Helpers shared by the tests, in one place: real servers in subprocesses and threads, HTTP
requests as clients send them, Slack requests as Slack signs them, pastes as people make them,
and the browser. Stand-ins live beside it: fakes.py (the fake embedder for unit tests of the
seams; the real model stays in the integration tests), openai_stub.py and slack_stub.py.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import itertools
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import pytest
from slack_stub import BOT_USER, TEAM, SlackStub


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base: str
    port: int
    proc: subprocess.Popen
    log: Path

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


def stop(proc: subprocess.Popen, timeout_s: float = 15) -> None:
    """Ask a server process to end (SIGTERM); kill it if it has not within `timeout_s`."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stderr_lines(proc: subprocess.Popen) -> list[str]:
    """What `proc` writes to stderr (opened as text), collected by a thread as it comes."""
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    return lines


def wait_for_line(proc: subprocess.Popen, lines: list[str], pattern: str, timeout_s: float) -> re.Match:
    """The first match of `pattern` in what `proc` printed (see stderr_lines); fails with
    everything it printed if it exits or `timeout_s` passes first."""
    deadline = time.monotonic() + timeout_s
    while (found := re.search(pattern, "".join(lines))) is None:
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
    return found


@contextmanager
def kb_serve(
    index: Path,
    log: Path,
    env: dict[str, str] | None = None,
    startup_s: float = 150.0,
    args: tuple[str, ...] = (),
) -> Iterator[Server]:
    """`kb serve --index INDEX [args]` with `env` added; yields once /api/health answers 200."""
    port = free_port()
    cmd = [sys.executable, "-m", "kb", "serve", "--index", str(index), "--port", str(port), *args]
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    server = Server(f"http://127.0.0.1:{port}", port, proc, log)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"kb serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(server.base + "/api/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"kb serve not healthy after {startup_s}s:\n{log.read_text()}")
            time.sleep(0.3)
        yield server
    finally:
        stop(proc)


def slack_http(bot, head_timeout_s: float | None = None, body_timeout_s: float = 30.0):
    """Slack's HTTP mode for `bot` on the HTTP host, bound to a free port on 127.0.0.1 and not yet
    serving (`.start()`, `.stop()`; `.address` is (host, port))."""
    from kb.doors.host.app import slack_app
    from kb.doors.host.server import HEAD_TIMEOUT_S, Served

    return Served(slack_app(bot), "127.0.0.1", 0, head_timeout_s or HEAD_TIMEOUT_S, body_timeout_s)


def raw(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, headers, body bytes) for one request; the path is sent exactly as given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host="Host" in (headers or {}), skip_accept_encoding=True)
        # One request per connection: a server that refuses a body without reading it must not
        # parse the rest of it as a next request.
        hdrs = {"Content-Length": str(len(body or b"")), "Connection": "close", **(headers or {})}
        for k, v in hdrs.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def post_json(port: int, path: str, obj: dict):
    status, headers, body = raw(
        port, "POST", path, json.dumps(obj).encode(), {"Content-Type": "application/json"}
    )
    return status, json.loads(body)


HCCL_LINE = "Init plugin so failed, ret = 1343225860"
NCCL_LINE = "ExternalError: Nccl error(2), unhandled system error"
# A closest entry with another first; the answer, "NCCL error(5)" (one card, several processes),
# among the sources a model reads. The words around the log line that give this change with a refit.
DUPLICATE_GPU = (
    "torchrun with 2 processes: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000"
)
# What the engineer reader knows: a post's words -> the title of the entry that answers it.
ENGINEER_KNOWS = {"Duplicate GPU detected": "NCCL error(5)", "Init plugin so failed": "Init plugin so failed"}


def engineer_reader(request):
    """A language model (tests/openai_stub.py `respond=`) that reads like an engineer: it cites the
    source whose title answers the question (ENGINEER_KNOWS), or says that none applies."""
    from openai_stub import Reply

    from kb.llm import NONE_APPLIES

    user = request.body["messages"][-1]["content"]
    question = re.search(r"<<<QUESTION \w+>>>\n(.*?)\n<<<END QUESTION", user, re.S).group(1)
    titles = dict(re.findall(r"<<<SOURCE \[(\d)\] \w+>>>\ntitle: (.*)\n", user))
    for words, title in ENGINEER_KNOWS.items():
        if words in question:
            for n, t in titles.items():
                if title in t:
                    return Reply(f"Source [{n}] is about this error. Follow its fix [{n}].")
    return Reply(f"{NONE_APPLIES}\n")


@contextmanager
def kb_server(index: Path, log_path: Path, startup_s: float = 150.0, env: dict[str, str] | None = None):
    """`kb serve --index INDEX` on 127.0.0.1 and a free port; yields the base URL once healthy."""
    with kb_serve(index, log_path, env=env, startup_s=startup_s) as server:
        yield server.base


def call(base: str, method: str, path: str, body=None, raw: bytes | None = None, headers=None):
    """(status, parsed JSON or text, headers) for one request; 4xx/5xx are returned, not raised."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    if data is not None and "Content-Type" not in (headers or {}):
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text, hdrs = r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        status, text, hdrs = e.code, e.read().decode(), e.headers
    if hdrs.get("content-type", "").startswith("application/json"):
        return status, json.loads(text), hdrs
    return status, text, hdrs


def training_log(key_lines: list[str], n: int = 200, seed: int = 3) -> str:
    """n lines of healthy training chatter with the error at the end, as people paste them."""
    r = random.Random(seed)
    lines = [
        r.choice(
            [
                f"I0510 09:{r.randint(10, 59)}:{r.randint(10, 59)}.{r.randint(100000, 999999)} {r.randint(1000, 9999)} "
                f"trainer.py:{r.randint(10, 400)}] epoch 0 step {i} loss {r.random():.4f}",
                f"[INFO] ME({r.randint(1000, 99999)}:1,MainProcess):2024-05-10-09:31:{r.randint(10, 59)} "
                f"[mindspore/train/callback.py:{r.randint(10, 900)}] step {i} done",
                f"LAUNCH INFO 2024-05-10 09:31:0{r.randint(0, 9)},{r.randint(100, 999)} Pod {r.randint(0, 3)} status RUNNING",
            ]
        )
        for i in range(n - len(key_lines))
    ]
    return "\n".join(lines + key_lines)


def noisy_log(key_lines: list[str], seed: int, total: int = 200, key_at: str = "end") -> str:
    """A 200-line paste the way it arrives from a multi-node job: timestamps, hosts, ranks, pids,
    INFO noise, repeated lines, a traceback, and the key line(s) buried or last."""
    rnd = random.Random(seed)
    hosts = [f"gpu-node-{rnd.randint(10, 99)}" for _ in range(4)]
    noise_templates = [
        "{ts} {host} [rank{r}] INFO step {s} loss={l:.4f} lr=3e-4 throughput={t} samples/s",
        "{host}:{pid}:{pid2} [{r}] NCCL INFO Channel {c:02d}/32 :    0   1   2   3   4   5   6   7",
        "{host}:{pid}:{pid2} [{r}] NCCL INFO Using network Socket",
        "I{md} {hms}.{us} {pid} tcp_utils.cc:181] The server starts to listen on IP_ANY:{port}",
        "{ts} INFO torch.distributed.run: local_rank={r} world_size=16 master_addr=10.0.{a}.{b}",
        "W{md} {hms}.{us} {pid} gpu_resources.cc:61] Please NOTE: device: {r}, GPU Compute Capability: 8.0",
        "{ts} DEBUG dataloader worker {r} prefetched batch {s}",
    ]
    lines = []
    for i in range(total - len(key_lines) - 4):
        lines.append(
            rnd.choice(noise_templates).format(
                ts=f"2024-05-{rnd.randint(1, 28):02d} 1{rnd.randint(0, 9)}:{rnd.randint(10, 59)}:{rnd.randint(10, 59)},{rnd.randint(100, 999)}",
                host=rnd.choice(hosts),
                r=rnd.randint(0, 7),
                s=i,
                l=rnd.random() * 5,
                t=rnd.randint(100, 900),
                pid=rnd.randint(1000, 99999),
                pid2=rnd.randint(1000, 99999),
                c=rnd.randint(0, 31),
                md=f"{rnd.randint(1, 12):02d}{rnd.randint(1, 28):02d}",
                hms=f"{rnd.randint(10, 23)}:{rnd.randint(10, 59)}:{rnd.randint(10, 59)}",
                us=rnd.randint(100000, 999999),
                port=rnd.randint(10000, 60000),
                a=rnd.randint(0, 9),
                b=rnd.randint(1, 254),
            )
        )
    tb = [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 88, in <module>',
        "    main()",
        '  File "/workspace/train.py", line 41, in main',
    ]
    tail = tb + key_lines
    if key_at == "end":
        lines += tail
    else:  # buried in the middle, followed by more noise (the launcher keeps printing)
        mid = len(lines) // 2
        lines = lines[:mid] + tail + lines[mid:]
    return "\n".join(lines)


def request(port: int, method: str, path: str, body: dict | None = None, conn=None, timeout: float = 120):
    """(status, parsed JSON) over `conn` (kept alive) or a fresh connection."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        if own:
            conn.close()


SECRET = "test-signing-secret"


_ts = itertools.count(1)


def new_ts() -> str:
    return f"{1710000000 + next(_ts)}.{uuid.uuid4().int % 1000000:06d}"


def signed_post(url: str, body: str, content_type: str, secret: str = SECRET, timestamp=None, headers=None):
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        url,
        data=body.encode(),
        method="POST",
        headers={
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": signature,
            **(headers or {}),
        },
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read().decode(), time.monotonic() - started
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), time.monotonic() - started


def post_event(url: str, event: dict, event_id: str | None = None, **kw):
    payload = {
        "token": "legacy",
        "team_id": TEAM,
        "api_app_id": "AKB",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or "Ev" + uuid.uuid4().hex[:10],
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
    }
    return signed_post(url, json.dumps(payload), "application/json", **kw)


def mention(text: str, channel: str = "CGENERAL", thread_ts: str | None = None, files=None) -> dict:
    ts = new_ts()
    event = {
        "type": "app_mention",
        "user": "UALICE",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "event_ts": ts,
        "channel": channel,
        "client_msg_id": str(uuid.uuid4()),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if files:
        event["files"] = files
    return event


def reply_text(call) -> str:
    """All text a posted message shows, with Slack's escaping undone."""
    parts = [call.params.get("text", "")]
    for block in call.params.get("blocks") or []:
        if "text" in block:
            parts.append(block["text"]["text"])
        parts += [el.get("text", "") for el in block.get("elements", [])]
    return unescape("\n".join(parts))


def slack_client(stub: SlackStub, token: str | None = None):
    from slack_sdk import WebClient

    return WebClient(token=token or stub.token, base_url=stub.api_url)


def nccl_entry(kb):
    return next(e for e in kb.index.entries if e.title == "NCCL error(2)")


def fence_lines(body: str) -> int:
    return sum(1 for line in body.split("\n") if line.strip().startswith(("```", "~~~")))


def copy_index(seeds_index: Path, tmp_path: Path) -> tuple[Path, str]:
    index = tmp_path / "index"
    shutil.copytree(seeds_index, index)
    return index, manifest(index)["generation"]


def manifest(index: Path) -> dict:
    return json.loads((index / "manifest.json").read_text())


def assert_same_json(got, want, tol: float = 1e-3, path: str = "") -> None:
    """The same JSON, floats within `tol`: a text embedded in batches of other sizes differs in its
    last bits (BLAS blocks a product by its shape), and rounding both sides does not hide that
    (-2.38995 gave -2.3899 in one process and -2.39 in the other)."""
    if isinstance(want, float):
        assert isinstance(got, (int, float)) and abs(got - want) <= tol, f"{path}: {got!r} != {want}"
    elif isinstance(want, (dict, list)):
        assert type(got) is type(want) and len(got) == len(want), f"{path}: {got!r} != {want!r}"
        for k in want if isinstance(want, dict) else range(len(want)):
            assert_same_json(got[k], want[k], tol, f"{path}[{k!r}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"
