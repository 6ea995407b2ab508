"""Which requests the HTTP host (`kb serve`, `kb slack --mode http`) answers: the Host header and the browser origin of each request.

`kb serve` has no login, so a browser is the way in for another site: a page the user visits
can send requests to 127.0.0.1. Three checks stop that (docs/reliability.md, case 6):
- Host (DNS rebinding): a page on attacker.example whose name is made to resolve to 127.0.0.1
  reaches the server as same-origin, but with its own name in Host. Only IP literals, localhost,
  this machine's own names and the names in KB_ALLOWED_HOSTS are answered; anything else is 421.
  An IP literal cannot be a rebinding attack: the page's origin is then the IP itself.
- Origin: browsers send Origin with every cross-site POST. A request that can change state (not
  GET/HEAD/OPTIONS) from another origin is refused with 403, so a cross-site "simple" POST (a
  form, or fetch with text/plain, which needs no preflight) never reaches the API or Gradio's
  queue. Scripts and curl send no Origin and are unaffected. WebSockets are checked the same way.
- CORS: a Starlette CORSMiddleware that allows no origin. Gradio then leaves CORS to the parent
  app; its own middleware reflected any localhost origin, with credentials (and, for a server
  not named localhost, any origin at all).
Slack's event route is exempt: Slack signs its requests, sends no Origin, and its Host is the
public name of whatever proxy is in front.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from urllib.parse import urlsplit

EXEMPT_PATHS = ("/slack/events",)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _hostname(host: str) -> str:
    """The name in a Host header value (`name:port`, `[::1]:port`), lower case, no trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_hosts(extra: str = "") -> set[str]:
    """Names answered besides IP literals: localhost, this machine's names, and `extra`, the
    `allowed_hosts` setting (KB_ALLOWED_HOSTS, comma-separated; `*` answers any name, e.g.
    behind a proxy that checks it already)."""
    names = {"localhost", socket.gethostname().lower()}
    try:
        names.add(socket.getfqdn().lower())
    except OSError:  # pragma: no cover - resolver trouble: the short name is enough
        pass
    names |= {n.strip().lower().rstrip(".") for n in extra.split(",")}
    return {n for n in names if n}


def _same_origin(origin: str, host: str) -> bool:
    try:
        o = urlsplit(origin)
        o_port = o.port or {"http": 80, "https": 443}.get(o.scheme)
    except ValueError:
        return False
    if not o.hostname or o.scheme not in ("http", "https"):
        return False  # "null" (sandboxed frames, file: pages) and anything odd
    h = urlsplit("//" + host.strip())
    try:
        h_port = h.port or o_port  # a proxy may drop the default port from Host
    except ValueError:
        return False
    return o.hostname.rstrip(".") == (h.hostname or "").rstrip(".") and o_port == h_port


class RequestGuard:
    """ASGI middleware applying the Host and Origin checks above to every route."""

    def __init__(self, app, hosts: set[str] | None = None) -> None:
        self.app = app
        self.hosts = allowed_hosts() if hosts is None else hosts

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path", "") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name = _hostname(host)
        if not (_is_ip(name) or name in self.hosts or "*" in self.hosts):
            message = (
                f"this server does not answer to the name {name!r}; if that name is right, add it to "
                "KB_ALLOWED_HOSTS (comma-separated) where kb serve runs"
            )
            await _refuse(scope, receive, send, 421, message)
            return
        origin = headers.get("origin")
        unsafe = scope["type"] == "websocket" or scope.get("method") not in SAFE_METHODS
        if origin is not None and unsafe and not _same_origin(origin, host):
            message = (
                f"cross-site request refused: a page at {origin[:100]} may not send requests here. "
                "Call the API from a script (no Origin header) or from this server's own page"
            )
            await _refuse(scope, receive, send, 403, message)
            return
        await self.app(scope, receive, send)


async def _refuse(scope, receive, send, status: int, message: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    payload = json.dumps({"error": message, "status": status}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),  # the body, if any, is not read
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def no_cross_origin(app) -> None:
    """CORS that allows no origin (see the module docstring)."""
    from starlette.middleware.cors import CORSMiddleware

    app.add_middleware(CORSMiddleware, allow_origins=[], allow_credentials=False)
