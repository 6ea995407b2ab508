"""Slack's HTTP mode: the Events API and slash-command route, served by the HTTP host
(kb/doors/host/app.py) alone with `kb slack --mode http` or beside the web door with
`kb serve --slack`. Signature and timestamp checks are bolt's RequestVerification (401); the
body is bounded (MAX_EVENT_BODY) and a body that is no Slack request is a 400, not a 500.
"""

from __future__ import annotations

from ...errors import KbError
from ..host.body import read_limited, too_large
from .bot import SlackBot
from .plumbing import read_tokens

EVENTS_PATH = "/slack/events"
MAX_EVENT_BODY = 1024 * 1024  # Slack event payloads are a few KB
BAD_TIMESTAMP = "X-Slack-Request-Timestamp must be the request's time in whole seconds"
MALFORMED = "malformed request body: Slack sends a JSON object or a form with a JSON payload"


def bolt_request(body: str, query: str, headers: dict):
    """A BoltRequest, or None when the body is no Slack request: bolt parses JSON (or a form's
    `payload` field) while building the request, so malformed JSON, or JSON that is not an
    object, raised there (a 500)."""
    from slack_bolt import BoltRequest

    try:
        request = BoltRequest(body=body, query=query, headers=headers)
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
    event = request.body.get("event", {}) if isinstance(request.body, dict) else None
    return request if isinstance(event, dict) else None


def events_endpoint(bot: SlackBot):
    """The Starlette endpoint that hands a Slack request to the bot."""
    from slack_bolt.adapter.starlette.handler import to_starlette_response
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response

    async def slack_events(request):
        body = await read_limited(request, MAX_EVENT_BODY)
        if body is None:
            return too_large(MAX_EVENT_BODY)
        # Bytes that are not UTF-8 fail the signature check (401) instead of the decoding (500).
        parsed = bolt_request(
            body.decode("utf-8", errors="replace"), request.url.query, dict(request.headers)
        )
        if parsed is None:
            return Response(MALFORMED, status_code=400)
        stamp = request.headers.get("x-slack-request-timestamp", "")
        if not (stamp.isascii() and stamp.isdigit()):
            return Response(BAD_TIMESTAMP, status_code=401)  # bolt's int() of it raised (a 500)
        # dispatch blocks until ack(); run it off the event loop so other requests go on.
        response = await run_in_threadpool(bot.app.dispatch, parsed)
        return to_starlette_response(response)

    return slack_events


def mount(app, kb, path: str = EVENTS_PATH, client=None) -> SlackBot:
    """Serve the bot in HTTP mode at `path` of a Starlette/FastAPI app. Needs SLACK_BOT_TOKEN
    and SLACK_SIGNING_SECRET in the environment. `kb`: a KnowledgeBase or the host's LiveKb."""
    tokens = read_tokens("http")
    try:
        import slack_bolt.adapter.starlette.handler  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as e:
        raise KbError(
            f"the Slack door needs slack-bolt and Starlette: pip install 'bilingual-kb[slack,web]' ({e})"
        ) from e
    bot = SlackBot(kb, bot_token=tokens.bot, signing_secret=tokens.signing_secret, client=client)
    app.add_route(path, events_endpoint(bot), methods=["POST"], include_in_schema=False)
    return bot
