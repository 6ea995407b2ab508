"""A real `kb serve` for tests: a subprocess on 127.0.0.1 and a free port, stopped afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


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


@contextmanager
def kb_serve(
    index: Path, log: Path, env: dict[str, str] | None = None, startup_s: float = 150.0
) -> Iterator[Server]:
    """`kb serve --index INDEX` with `env` added; yields once /api/health answers 200."""
    port = free_port()
    cmd = [sys.executable, "-m", "kb", "serve", "--index", str(index), "--port", str(port)]
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
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def slack_http(bot, head_timeout_s: float | None = None):
    """Slack's HTTP mode for `bot` on the HTTP host, bound to a free port on 127.0.0.1 and not yet
    serving (`.start()`, `.stop()`; `.address` is (host, port))."""
    from kb.doors.host.app import slack_app
    from kb.doors.host.server import HEAD_TIMEOUT_S, Served

    return Served(slack_app(bot), "127.0.0.1", 0, head_timeout_s or HEAD_TIMEOUT_S)
