"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

It speaks the real wire protocol (JSON for `stream: false`, server-sent events for
`stream: true`), so the code under test goes through LangChain, the openai client and httpx
exactly as it would against vLLM, Ollama or a hosted API. Each test scripts the replies:

    with OpenAIStub() as stub:
        stub.script(Reply("Set NCCL_DEBUG=INFO [1]."))
        settings = LlmSettings(model="stub", base_url=stub.base_url, ...)
        ...
        assert stub.requests[0].body["messages"][0]["role"] == "system"

Replies are used in order; the last one repeats when the script runs out. `respond=` takes a
function of the request for replies that depend on what was asked. Standard library only.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    content: str = ""  # the assistant message
    status: int = 200  # non-200: an OpenAI-style error body with this status
    delay_s: float = 0.0  # wait before sending anything (a slow or stuck server)
    chunk_delay_s: float = 0.0  # wait between streamed chunks (a server that trickles)
    raw: bytes | None = None  # send exactly these bytes as a 200 body instead (garbage)
    pieces: int = 0  # streamed chunks; 0: about one per word


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: dict

    @property
    def prompt_text(self) -> str:
        """Every message's text joined: what the model was shown."""
        parts = []
        for m in self.body.get("messages", []):
            c = m.get("content", "")
            parts.append(c if isinstance(c, str) else json.dumps(c, ensure_ascii=False))
        return "\n".join(parts)


def split_pieces(text: str, pieces: int = 0) -> list[str]:
    """Cut text the way a model streams it: small pieces that split words and lines anywhere."""
    if not text:
        return []
    if pieces <= 0:
        out, cur = [], ""
        for ch in text:
            cur += ch
            if ch in " \n" and len(cur) >= 3:
                out.append(cur)
                cur = ""
        return [*out, cur] if cur else out
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class OpenAIStub:
    def __init__(self, respond: Callable[[Request], Reply] | None = None) -> None:
        self._script: list[Reply] = [Reply("")]
        self._respond = respond
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------------
    def script(self, *replies: Reply | str) -> None:
        with self._lock:
            self._script = [r if isinstance(r, Reply) else Reply(r) for r in replies] or [Reply("")]
            self.requests.clear()

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._respond is not None:
                return self._respond(request)
            return self._script.pop(0) if len(self._script) > 1 else self._script[0]

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the stub first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def kb_env(self, timeout_s: float) -> dict[str, str]:
        """The settings that point a `kb` process at this stub (a dummy key in the environment,
        no retries: a test sees the first failure)."""
        return {
            "KB_LLM_MODEL": "stub-model",
            "KB_LLM_BASE_URL": self.base_url,
            "KB_LLM_API_KEY_ENV": "KB_TEST_LLM_KEY",
            "KB_TEST_LLM_KEY": "dummy-key",
            "KB_LLM_TIMEOUT_S": f"{timeout_s:g}",
            "KB_LLM_MAX_RETRIES": "0",
        }

    def start(self) -> OpenAIStub:
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, name="openai-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def closed_port_url() -> str:
    """A base URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIStub
    protocol_version = "HTTP/1.0"  # one request per connection; the body ends when it closes

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(
                200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]}
            )
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        reply = self.owner._next(request)
        if reply.delay_s and self.owner._closing.wait(reply.delay_s):
            return
        try:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(
                    404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}}
                )
            elif reply.raw is not None:
                self._send(200, "application/json", reply.raw)
            elif reply.status != 200:
                self._json(reply.status, {"error": {"message": "scripted failure", "type": "server_error"}})
            elif body.get("stream"):
                self._stream(reply, body)
            else:
                self._json(200, _completion(reply.content, body))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to do

    def _send(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, "application/json", json.dumps(obj, ensure_ascii=False).encode())

    def _stream(self, reply: Reply, body: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = body.get("model", "stub")
        pieces = split_pieces(reply.content, reply.pieces)
        for i, piece in enumerate(pieces):
            if i and reply.chunk_delay_s and self.owner._closing.wait(reply.chunk_delay_s):
                return
            delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, obj: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n")
        self.wfile.flush()


def _completion(content: str, body: dict) -> dict:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stub"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
