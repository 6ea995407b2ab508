"""The HTTP host: composes the doors on one ASGI app and runs `kb serve` and `kb slack`.

    kb serve            the JSON API and the chat (kb/doors/web/)
    kb serve --slack    the same, plus Slack's events route (kb/doors/slack/events.py)
    kb serve --mcp      the same, plus the MCP server at /mcp (kb/doors/mcp/)
    kb slack            Slack alone: Socket Mode with SLACK_APP_TOKEN, else HTTP mode on this host
    kb mcp              the MCP server alone: stdio, or streamable HTTP on this host with --http

Every app gets the same middleware, outermost first: the Host/Origin guard (guard.py), the
request body limits (body.py: the query limit plus room for the JSON envelope, Slack events
1 MB) and CORS that allows no origin. This module is the only one that imports two doors.
"""

from __future__ import annotations

import os
import sys
import threading

from ...config import Settings
from ...errors import KbError
from .body import BodyLimit
from .guard import RequestGuard, no_cross_origin
from .live import RELOAD_CHECK_S, LiveKb

BODY_HEADROOM = 64 * 1024  # JSON envelope + history on top of the query
# The query limit is about the query as decoded (kb/request.py measures it); JSON may spend up to
# six bytes on one byte of it (`\u0001`), and a client that escapes all non-ASCII (Python's
# json.dumps) sends 中 as `\u4e2d`, six bytes for three: a 1.3 MB Chinese log is a 2.6 MB body.
JSON_ESCAPE_FACTOR = 6
QUERY_PATHS = ("/api/search", "/api/ask", "/api/feedback")


def body_limit(settings: Settings) -> int:
    """The request body allowed where a query comes in (QUERY_PATHS, MCP): the query limit, as
    escaped. Every other route keeps the query limit + BODY_HEADROOM."""
    return JSON_ESCAPE_FACTOR * settings.max_query_bytes + BODY_HEADROOM


# The chat takes a whole log (up to MAX_PASTE_BYTES, cut to the part that matters before it is
# searched): its queue route is allowed that, JSON-escaped (a newline is two bytes).
CHAT_QUEUE_PATH = "/gradio_api/queue/join"


def _guarded(app, settings: Settings, slack: bool, mcp: bool = False, chat: bool = False):
    from ...query import MAX_PASTE_BYTES
    from ..slack.events import EVENTS_PATH, MAX_EVENT_BODY

    no_cross_origin(app)
    per_path = {EVENTS_PATH: MAX_EVENT_BODY} if slack else {}
    if chat:
        per_path[CHAT_QUEUE_PATH] = 2 * MAX_PASTE_BYTES + BODY_HEADROOM
        per_path.update(dict.fromkeys(QUERY_PATHS, body_limit(settings)))
    formats = _mcp_formats() if mcp else {}
    per_path.update(dict.fromkeys(formats, body_limit(settings)))  # the MCP path takes queries too
    limit = settings.max_query_bytes + BODY_HEADROOM
    app.add_middleware(BodyLimit, limit=limit, per_path=per_path, formats=formats)
    app.add_middleware(RequestGuard, hosts=_hosts(settings))  # added last: runs first
    return app


def _hosts(settings: Settings) -> set[str]:
    from .guard import allowed_hosts

    return allowed_hosts(settings.allowed_hosts)


def create_app(kb, slack: bool = False, reload_every_s: float = RELOAD_CHECK_S, mcp: bool = False):
    """The web door (API routes, then the chat at `/`, mounted last: a mount at `/` answers
    every path), optionally with Slack's events route and the MCP server at /mcp."""
    from fastapi import FastAPI

    from ..web.api import add_api
    from ..web.chat import mount_chat

    live = LiveKb(kb, reload_every_s)
    app = FastAPI(title="kb", docs_url=None, redoc_url=None, openapi_url=None)
    add_api(app, live)
    if slack:
        _mount_slack(app, live)
    if mcp:
        _mount_mcp(app, live)
    mount_chat(app, live)
    return _guarded(app, kb.settings, slack, mcp, chat=True)


def _mcp_server(live: LiveKb):
    from ...feedback import open_store

    try:
        from ..mcp.server import build_server
    except ModuleNotFoundError as e:
        raise KbError(f"the MCP door needs the package {e.name!r}: pip install 'bilingual-kb[mcp]'") from e
    return build_server(live, open_store(live.kb.settings))


def _mount_mcp(app, live: LiveKb) -> None:
    from ..mcp.http import mount

    mount(app, _mcp_server(live), body_limit(live.kb.settings))


def _mcp_formats() -> dict:
    from ..mcp.http import MCP_PATH, jsonrpc_refusal

    return {MCP_PATH: jsonrpc_refusal}


def mcp_app(live: LiveKb):
    """`kb mcp --http`: the MCP server alone, at /mcp, with a health check."""
    from starlette.responses import PlainTextResponse

    from ..mcp.http import streamable_app

    settings = live.kb.settings
    app = streamable_app(_mcp_server(live), body_limit(settings))
    app.add_route("/healthz", lambda _request: PlainTextResponse("ok"), methods=["GET", "HEAD"])
    return _guarded(app, settings, slack=False, mcp=True)


def _mount_slack(app, live: LiveKb) -> None:
    try:
        from ..slack.events import mount
    except ModuleNotFoundError as e:
        raise KbError(f"--slack needs the package {e.name!r}: pip install 'bilingual-kb[slack]'") from e
    mount(app, live)


def slack_app(bot):
    """Slack's HTTP mode alone: the events route and a health check."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from ..slack.events import EVENTS_PATH, events_endpoint

    app = Starlette(
        routes=[
            Route(EVENTS_PATH, events_endpoint(bot), methods=["POST"]),
            Route("/healthz", lambda _request: PlainTextResponse("ok"), methods=["GET", "HEAD"]),
        ]
    )
    return _guarded(app, bot.live.kb.settings, slack=True)


def bind_address(args, default_port: int) -> tuple[str, int]:
    """--host and --port when given; otherwise loopback: nothing is exposed unless asked for."""
    return args.host or "127.0.0.1", default_port if args.port is None else args.port


def announce(host: str, port: int) -> None:
    """Where `kb serve` listens; loudly when that is more than this machine."""
    from ..web.api import API_LIST

    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"kb serve: listening on {host}: the chat and API are reachable from the network, without authentication",
            file=sys.stderr,
        )
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(
        f"kb serve: http://{shown}:{port}/  (API: {API_LIST})",
        file=sys.stderr,
        flush=True,
    )


def serve_command(args, settings: Settings) -> int:
    """`kb serve`: open the knowledge base once, build the app, serve until interrupted."""
    from ...progress import ProgressBar
    from ...service import KnowledgeBase
    from .logs import configure_logging
    from .server import check_port, launch

    host, port = bind_address(args, 7860)
    _require_web_extra()
    check_port(host, port)  # fail before the slow part when the port is taken
    kb = KnowledgeBase.open(settings=settings, progress=ProgressBar())
    configure_logging(settings.llm.api_key_env)
    app = create_app(kb, slack=args.slack, mcp=getattr(args, "mcp", False))
    launch(app, host, port, bound=lambda taken: announce(host, taken))
    return 0


def _require_web_extra() -> None:
    """`pip install -e .` has no web packages: say which extra brings them, not a traceback."""
    # Looked up, not imported: importing gradio here would fix its temp folder before the chat
    # gives it a private one (kb/doors/web/chat.py), and /tmp/gradio would outlive the server.
    from importlib.util import find_spec

    for name in ("fastapi", "gradio", "uvicorn"):
        if find_spec(name) is None:
            raise KbError(
                f"the chat and the API need the web extra (the package {name!r} is missing): "
                "pip install 'bilingual-kb[web]', or pip install -e '.[web]' in a checkout"
            )


def slack_command(args, settings: Settings) -> int:
    """`kb slack`: the bot in Socket Mode, or in HTTP mode on this host."""
    from ...progress import ProgressBar
    from ...service import KnowledgeBase
    from ..slack.bot import SlackBot
    from ..slack.plumbing import read_tokens
    from .logs import configure_logging

    mode = args.mode or ("socket" if os.environ.get("SLACK_APP_TOKEN") else "http")
    tokens = read_tokens(mode)  # before loading anything: a missing token fails in milliseconds
    # The bot's own log at INFO (redeliveries dropped, files unreadable...); libraries at WARNING;
    # the tokens (and any other secret in the environment) masked in every line.
    configure_logging()
    kb = KnowledgeBase.open(settings=settings, progress=ProgressBar())
    bot = SlackBot(LiveKb(kb), bot_token=tokens.bot, signing_secret=tokens.signing_secret)
    try:
        if mode == "socket":
            _socket_mode(bot, tokens.app)
        else:
            _http_mode(bot, *bind_address(args, 3000))
    finally:
        bot.close()
    return 0


def _socket_mode(bot, app_token: str) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_sdk.errors import SlackApiError

    try:
        handler = SocketModeHandler(bot.app, app_token)
        handler.connect()
    except SlackApiError as e:
        raise KbError(f"Slack did not accept SLACK_APP_TOKEN: {e.response.get('error')}") from e
    print("kb slack: connected in Socket Mode; Ctrl+C stops", file=sys.stderr)
    threading.Event().wait()


def _http_mode(bot, host: str, port: int) -> None:
    from ..slack.events import EVENTS_PATH
    from .server import check_port, launch

    check_port(host, port)

    def bound(taken: int) -> None:
        print(
            f"kb slack: listening on http://{host}:{taken}{EVENTS_PATH} "
            "(set it as the Request URL of Event Subscriptions and of /kb); Ctrl+C stops",
            file=sys.stderr,
            flush=True,
        )

    launch(slack_app(bot), host, port, bound)


def mcp_command(args, settings: Settings) -> int:
    """`kb mcp`: the MCP server on stdio (an agent starts it), or on streamable HTTP with --http."""
    from ...progress import ProgressBar
    from ...service import KnowledgeBase
    from .logs import configure_logging
    from .server import check_port, launch

    if args.http:
        host, port = bind_address(args, 8765)
        check_port(host, port)
    # stdout is the protocol's on stdio: progress and the log go to stderr.
    configure_logging(settings.llm.api_key_env)
    live = LiveKb(KnowledgeBase.open(settings=settings, progress=ProgressBar()))
    if not args.http:
        _mcp_server(live).run()  # stdio until the client closes it
        return 0

    def bound(taken: int) -> None:
        print(
            f"kb mcp: streamable HTTP at http://{host}:{taken}/mcp ; Ctrl+C stops",
            file=sys.stderr,
            flush=True,
        )

    launch(mcp_app(live), host, port, bound)
    return 0
