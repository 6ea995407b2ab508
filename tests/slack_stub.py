"""A local stand-in for the Slack Web API, for tests: http.server on 127.0.0.1 in a thread.

It answers the methods the bot calls (auth.test, chat.postMessage, chat.update, reactions.add /
reactions.remove, conversations.replies, files.info, views.open) and serves uploaded files at url_private,
records every call with the time it arrived, and can answer a method with 429 + Retry-After.
Point slack_sdk at it with `WebClient(token=..., base_url=stub.api_url)`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

BOT_USER = "UKBBOT"
BOT_ID = "BKBBOT"
TEAM = "TTEST"


@dataclass
class Call:
    method: str
    params: dict
    at: float  # time.monotonic() when it arrived
    status: int = 200
    token: str = ""
    response: dict = field(default_factory=dict)


@dataclass
class StubFile:
    id: str
    name: str
    content: bytes
    filetype: str = "text"
    mimetype: str = "text/plain"


@dataclass
class SlackStub:
    token: str = "xoxb-test-token"
    calls: list[Call] = field(default_factory=list)
    downloads: list[Call] = field(default_factory=list)
    # (channel, thread_ts) -> messages, as conversations.replies returns them (bot posts added too)
    threads: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    _rate_limits: dict = field(default_factory=dict)  # method -> [retry_after seconds, ...]
    _failures: dict = field(default_factory=dict)  # method -> [error, ...]
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ts: itertools.count = field(default_factory=lambda: itertools.count(1))

    # -- control ---------------------------------------------------------------------------
    def start(self) -> SlackStub:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def api_url(self) -> str:
        return self.url + "/api/"

    def rate_limit(self, method: str, retry_after: int, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with 429 and Retry-After."""
        with self._lock:
            self._rate_limits.setdefault(method, []).extend([retry_after] * times)

    def fail(self, method: str, error: str, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with {"ok": false, "error": error}."""
        with self._lock:
            self._failures.setdefault(method, []).extend([error] * times)

    def add_file(self, name: str, content: str | bytes, **kw) -> StubFile:
        data = content.encode() if isinstance(content, str) else content
        f = StubFile(id=f"F{len(self.files) + 1:06d}", name=name, content=data, **kw)
        self.files[f.id] = f
        return f

    def add_thread_message(self, channel: str, thread_ts: str, message: dict) -> None:
        with self._lock:
            self.threads.setdefault((channel, thread_ts), []).append(message)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.downloads.clear()
            self._rate_limits.clear()
            self._failures.clear()

    # -- reading what happened ---------------------------------------------------------------
    def of(self, method: str, status: int | None = 200) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and (status is None or c.status == status)]

    def wait_for(self, method: str, count: int = 1, timeout: float = 30.0) -> list[Call]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.of(method)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{method}: expected {count} call(s) in {timeout}s, got {len(self.of(method))}")

    # -- answering -----------------------------------------------------------------------------
    def answer(self, method: str, params: dict, token: str) -> tuple[int, dict, dict]:
        with self._lock:
            limits = self._rate_limits.get(method)
            if limits:
                retry_after = limits.pop(0)
                self.calls.append(Call(method, params, time.monotonic(), 429, token))
                return 429, {"Retry-After": str(retry_after)}, {"ok": False, "error": "ratelimited"}
            call = Call(method, params, time.monotonic(), 200, token)
            self.calls.append(call)
            failure = self._failures[method].pop(0) if self._failures.get(method) else None
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if failure:
            call.response = {"ok": False, "error": failure}
        elif token != self.token:
            call.response = {"ok": False, "error": "invalid_auth"}
        elif handler is None:
            call.response = {"ok": False, "error": "unknown_method"}
        else:
            call.response = handler(params)
        return 200, {}, call.response

    def _auth_test(self, p: dict) -> dict:
        return {
            "ok": True,
            "url": self.url + "/",
            "team": "test",
            "user": "kb",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
        }

    def _new_ts(self) -> str:
        return f"{1700000000 + next(self._ts)}.000100"

    def _chat_postMessage(self, p: dict) -> dict:
        ts = self._new_ts()
        message = {"type": "message", "bot_id": BOT_ID, "user": BOT_USER, "text": p.get("text", ""), "ts": ts}
        if p.get("metadata"):
            message["metadata"] = p["metadata"]
        message["thread_ts"] = p.get("thread_ts") or ts  # a top-level post starts its own thread
        self.add_thread_message(p["channel"], message["thread_ts"], message)
        return {"ok": True, "channel": p["channel"], "ts": ts, "message": message}

    def _chat_update(self, p: dict) -> dict:
        return {"ok": True, "channel": p["channel"], "ts": p["ts"], "text": p.get("text", "")}

    def _reactions_add(self, p: dict) -> dict:
        return {"ok": True}

    def _reactions_remove(self, p: dict) -> dict:
        return {"ok": True}

    def _conversations_replies(self, p: dict) -> dict:
        with self._lock:
            messages = list(self.threads.get((p["channel"], p["ts"]), []))
        if not messages:
            return {"ok": False, "error": "thread_not_found"}
        return {"ok": True, "messages": sorted(messages, key=lambda m: float(m["ts"])), "has_more": False}

    def _views_open(self, p: dict) -> dict:
        if not p.get("trigger_id"):
            return {"ok": False, "error": "invalid_trigger_id"}
        view = p.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        return {"ok": True, "view": {**view, "id": f"V{next(self._ts):06d}"}}

    def _files_info(self, p: dict) -> dict:
        f = self.files.get(p.get("file"))
        if f is None:
            return {"ok": False, "error": "file_not_found"}
        url = f"{self.url}/files-pri/{TEAM}-{f.id}/{f.name}"
        return {
            "ok": True,
            "file": {
                "id": f.id,
                "name": f.name,
                "title": f.name,
                "filetype": f.filetype,
                "mimetype": f.mimetype,
                "size": len(f.content),
                "url_private": url,
                "url_private_download": url + "?download=1",
            },
        }


def _handler(stub: SlackStub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, status: int, body: bytes, headers: dict, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _token(self, params: dict) -> str:
            auth = self.headers.get("Authorization", "")
            return auth[7:] if auth.startswith("Bearer ") else params.get("token", "")

        def _api(self, params: dict) -> None:
            method = urlsplit(self.path).path[len("/api/") :]
            status, headers, body = stub.answer(method, params, self._token(params))
            self._reply(status, json.dumps(body).encode(), headers, "application/json; charset=utf-8")

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path.startswith("/api/"):
                self._api(dict(parse_qsl(url.query)))
            elif url.path.startswith("/files-pri/"):
                file_id = url.path.split("/")[2].split("-", 1)[1]
                token = self._token({})
                with stub._lock:
                    stub.downloads.append(Call("download", {"file": file_id}, time.monotonic(), 200, token))
                f = stub.files.get(file_id)
                if token != stub.token or f is None:
                    # Slack answers a download without a valid token with its HTML sign-in page.
                    self._reply(200, b"<html>sign in</html>", {}, "text/html")
                else:
                    self._reply(200, f.content, {}, f.mimetype)
            else:
                self._reply(404, b"{}", {}, "application/json")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8")
            params = dict(parse_qsl(urlsplit(self.path).query))
            if "json" in (self.headers.get("Content-Type") or ""):
                params.update(json.loads(raw or "{}"))
            else:
                params.update(parse_qsl(raw))
            for key in ("blocks", "metadata", "view"):  # form-encoded calls carry these as JSON strings
                if isinstance(params.get(key), str):
                    params[key] = json.loads(params[key])
            self._api(params)

        def log_message(self, fmt, *args) -> None:
            pass

    return Handler
