"""The MCP server as stateless streamable HTTP, served by the HTTP host (kb/doors/host/app.py):
alone (`kb mcp --http`) or at /mcp beside the chat and the API (`kb serve --mcp`).

Stateless with JSON responses: every POST is one JSON-RPC exchange, no session to keep, so any
number of agents can call it and a restart loses nothing. The host gives it what every door
gets: the Host/Origin guard (so the SDK's own DNS-rebinding check is off: one policy,
KB_ALLOWED_HOSTS, for every route), the body limit (a refusal at this path is a JSON-RPC error,
which MCP clients show, instead of the API's JSON) and the request-head timeout.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

MCP_PATH = "/mcp"


def streamable_app(server, body_limit: int):
    """The SDK's Starlette app serving `server` at MCP_PATH (its lifespan runs the sessions'
    task group). The transport's options are the ones `MCPServer.run("streamable-http", ...)`
    takes; the app is built here because the host serves it, not the SDK's own uvicorn."""
    from mcp.server.transport_security import TransportSecuritySettings

    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=body_limit,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    for route in app.routes:
        if getattr(route, "path", None) == MCP_PATH:
            route.app = _post_only(route.app)
    return app


def _post_only(handler):
    """Only POST reaches the transport. A stateless server has nothing to stream: a GET was
    answered with an event stream held open for ever, and 511 idle ones took every slot of the
    host (its chat and API answered 503 to everyone). MCP lets a server answer 405 instead."""

    async def app(scope, receive, send):
        if scope["type"] != "http" or scope["method"] == "POST":
            await handler(scope, receive, send)
            return
        body = jsonrpc_refusal("this MCP server is stateless: send each JSON-RPC request as a POST", 405)
        headers = [(b"content-type", b"application/json"), (b"allow", b"POST")]
        await send(
            {
                "type": "http.response.start",
                "status": 405,
                "headers": [*headers, (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


def mount(app, server, body_limit: int) -> None:
    """Serve `server` at MCP_PATH of an existing FastAPI/Starlette app (`kb serve --mcp`): its
    route goes in before the chat's catch-all mount at `/`, its task group into the app's lifespan."""
    sub = streamable_app(server, body_limit)
    app.router.routes.extend(sub.routes)
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(parent):
        async with server.session_manager.run(), outer(parent) as state:
            yield state

    app.router.lifespan_context = lifespan


def jsonrpc_refusal(message: str, status: int) -> bytes:
    """A refused request as a JSON-RPC error (id null: the request was not read), so an MCP
    client raises it with this message instead of "Server returned an error response"."""
    import json

    error = {"code": -32600, "message": message, "data": {"status": status}}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
