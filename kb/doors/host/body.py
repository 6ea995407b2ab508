"""Request body limits for every route the HTTP host serves (the JSON API, Gradio's queue and
upload, Slack events), in one place.

`BodyLimit` answers 413 (JSON) for a body over its path's limit before any route reads it.
A declared Content-Length is checked before anything is read (the HTTP parser refuses a body
longer than it declares, so no counting is needed then). A chunked body declares nothing: it is
read here up to the limit and handed on whole. After the 413 the rest of the refused body is read
and dropped (bounded: DRAIN_*) before the connection closes: closing with unread data makes the
kernel reset the connection, and a client still sending would never see the answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

# After a 413 the rest of the refused body is read and dropped: at most this much, for at most
# this long, until the client pauses this long.
DRAIN_MAX_BYTES = 64 * 1024 * 1024
DRAIN_MAX_S = 10.0
DRAIN_IDLE_S = 1.0


class BodyLimit:
    """ASGI middleware: `limit` bytes per request body; `per_path` sets other limits for
    exact paths (Slack's events are a few KB); `formats` other 413 bodies for exact paths, as
    `format(message, status) -> bytes` (MCP's clients read a JSON-RPC error, not the API's JSON)."""

    def __init__(
        self,
        app,
        limit: int,
        per_path: dict[str, int] | None = None,
        formats: dict[str, Callable[[str, int], bytes]] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.per_path = per_path or {}
        self.formats = formats or {}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan; websockets carry no request body
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(scope.get("path", ""), self.limit)
        fmt = self.formats.get(scope.get("path", ""))
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            message = f"the request body is {int(declared)} bytes; the limit is {limit}."
            await _refuse_body(receive, send, message, fmt)
            return
        if b"transfer-encoding" in headers:  # chunked: nothing declared, count it here
            body, more = bytearray(), True
            while more:
                event = await receive()
                if event["type"] != "http.request":
                    return  # the client went away
                body += event.get("body", b"")
                more = event.get("more_body", False)
                if len(body) > limit:
                    message = f"the request body is over the limit of {limit} bytes."
                    await _refuse_body(receive, send, message, fmt)
                    return
            receive = _replay(bytes(body), receive)
        await self.app(scope, receive, send)


def _replay(body: bytes, receive):
    """An ASGI `receive` that gives the buffered body once, then defers to the server's."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay():
        return pending.pop() if pending else await receive()

    return replay


async def _refuse_body(receive, send, message: str, fmt: Callable[[str, int], bytes] | None = None) -> None:
    message = f"{message} Send the part of the log around the error."
    payload = fmt(message, 413) if fmt else json.dumps({"error": message, "status": 413}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),  # never read what is left as a next request
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": True})
    # The whole answer is out (its length is declared); drop what the client is still sending.
    dropped, deadline = 0, time.monotonic() + DRAIN_MAX_S
    while dropped < DRAIN_MAX_BYTES:
        try:
            wait_s = min(DRAIN_IDLE_S, deadline - time.monotonic())
            event = await asyncio.wait_for(receive(), max(0.0, wait_s))
        except TimeoutError:
            break
        if event["type"] != "http.request":
            break
        dropped += len(event.get("body", b""))
        if not event.get("more_body", False):
            break
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def read_limited(request, limit: int) -> bytes | None:
    """A Starlette request's body, or None when it is over `limit` (the rest is read and dropped,
    as `BodyLimit` does): for a route that must hold its limit also where no BodyLimit runs."""
    body, size = bytearray(), 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            body += chunk
        elif size > DRAIN_MAX_BYTES:
            break
    return bytes(body) if size <= limit else None


def too_large(limit: int):
    """The 413 answer `read_limited`'s caller gives (the JSON BodyLimit sends)."""
    from starlette.responses import JSONResponse

    message = f"the request body is over the limit of {limit} bytes."
    return JSONResponse({"error": message, "status": 413}, status_code=413, headers={"Connection": "close"})
