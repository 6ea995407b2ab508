"""The Slack door: a slack-bolt app that answers in the thread of the asking message.

Triggers: an @mention in a channel (app_mention), a direct message (message.im), `/kb <error>`,
and a reply from the asker in a channel thread the bot answered (message.channels/groups:
followups.py). Every answer carries 👍/👎 buttons (feedback.py).
Flow: acknowledge at once (bolt acks Events API requests before the listener runs; the slash
command calls ack() first), mark the question (":mag:" reaction or a "searching..." message), read
pasted log files (kb/slack_files.py), use the thread's earlier messages as history, ask the
KnowledgeBase, post the Block Kit answer (kb/slack_blocks.py).

Run modes: Socket Mode (SLACK_BOT_TOKEN + SLACK_APP_TOKEN; no public URL needed) or HTTP mode
(SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET): the events route (kb/doors/slack/events.py) on the
HTTP host, alone (`kb slack --mode http`) or beside the web door (`kb serve --slack`). Answers
run concurrently on bolt's listener pool; a rebuilt index is picked up by the host's reload
policy (kb/doors/host/live.py). slack_bolt / slack_sdk are imported inside functions.
"""

from __future__ import annotations

import logging
import os

from ...errors import KbError
from ...query import MAX_PASTE_BYTES, Excerpt, excerpt, kept_note
from ..host.live import LiveKb
from .files import read_file
from .plumbing import Seen, TrackingExecutor, bolt_logger, slack_to_plain

log = logging.getLogger("kb.slack")

SEARCHING_REACTION = "mag"
# Subtypes of user messages worth answering; edits, joins and bot posts have other subtypes.
ANSWERED_SUBTYPES = (None, "file_share", "thread_broadcast")
MAX_FILES = 3  # pasted logs read per message
MAX_HISTORY_MESSAGES = 50
HISTORY_FILE_BYTES = 16 * 1024  # of a log attached to an earlier message in the thread
# bolt refuses timestamps older than 5 minutes; signatures are remembered a little longer.
REPLAY_WINDOW_S = 6 * 60
# An empty mention or `/kb` says nothing to read a language from: the help is in both.
USAGE = (
    "Paste an error message or a log after the mention (or upload the log file), e.g. "
    "`@kb ExternalError: Nccl error(2), unhandled system error` or `/kb Init plugin so failed`.\n"
    "在提及之后贴上报错信息或日志（或上传日志文件），例如 `@kb 多机训练报 Network is unreachable` 或 "
    "`/kb Init plugin so failed`。"
)


# -- tokens ----------------------------------------------------------------------------------


# -- the bot ---------------------------------------------------------------------------------


class SlackBot:
    """The bolt App plus what it needs: the KnowledgeBase, dedupe and the executor in flight.

    `kb` is a KnowledgeBase, or the host's LiveKb that reloads it.
    `client` is the slack_sdk WebClient to use (tests point its base_url at a local stand-in);
    without it one is built from `bot_token`. Either way 429 answers are retried after Retry-After,
    and a 500/503 twice with backoff (a single 503 on chat.postMessage must not lose the answer).
    """

    def __init__(
        self,
        kb,
        *,
        bot_token: str = "",
        signing_secret: str = "",
        client=None,
        max_workers: int = 4,
    ) -> None:
        from slack_bolt import App
        from slack_bolt.error import BoltError
        from slack_sdk import WebClient
        from slack_sdk.http_retry.builtin_handlers import (
            RateLimitErrorRetryHandler,
            ServerErrorRetryHandler,
        )

        self.live = kb if isinstance(kb, LiveKb) else LiveKb(kb)
        # SLACK_API_URL: another Web API base URL (a proxy, or a local stand-in in tests).
        self.client = client or WebClient(
            token=bot_token, base_url=os.environ.get("SLACK_API_URL") or WebClient.BASE_URL
        )
        for handler in (
            RateLimitErrorRetryHandler(max_retry_count=3),
            ServerErrorRetryHandler(max_retry_count=2),
        ):
            if not any(isinstance(h, type(handler)) for h in self.client.retry_handlers):
                self.client.retry_handlers.append(handler)
        self.executor = TrackingExecutor(max_workers)
        self._seen_events = Seen()
        self._seen_messages = Seen()
        self._seen_signatures = Seen(ttl=REPLAY_WINDOW_S)
        try:
            # auth.test runs here: a wrong SLACK_BOT_TOKEN fails now, with a message, not on the first event.
            self.app = App(
                client=self.client,
                signing_secret=signing_secret,
                listener_executor=self.executor,
                name="kb",
                logger=bolt_logger(),
            )
        except BoltError as e:
            raise KbError(f"Slack did not accept SLACK_BOT_TOKEN: {e}") from e

        self._add_middleware()
        self.app.event("app_mention")(self._on_event)
        self.app.event("message")(self._on_message)
        self.app.command("/kb")(self._on_command)
        self._add_feedback_and_followups()

    def _add_feedback_and_followups(self) -> None:
        from ...feedback import open_store
        from .feedback import SlackFeedback
        from .followups import Followups

        settings = self.live.kb.settings
        self.feedback = SlackFeedback(self.live, open_store(settings), self.client)
        self.feedback.register(self.app)
        self.followups = Followups(settings.slack_followups)

    def _add_middleware(self) -> None:
        from slack_bolt import BoltResponse

        def drop_redeliveries(body, next):  # noqa: A002 - bolt passes middleware arguments by name
            if body.get("event_id") and not self._seen_events.first_time("event:" + body["event_id"]):
                log.info("ignored a redelivery of event %s", body["event_id"])
                return BoltResponse(status=200, body="")
            return next()

        def drop_replays(request, next):  # noqa: A002
            # bolt has checked the signature and that the timestamp is within 5 minutes; within
            # those minutes the very same signed request can be sent again (a replayed /kb would
            # be answered twice). A signature is unique to its body and timestamp: answer it once.
            signature = (request.headers.get("x-slack-signature") or [""])[0]
            if signature and not self._seen_signatures.first_time("sig:" + signature):
                log.info("ignored a replayed request (signature seen before)")
                return BoltResponse(status=200, body="")
            return next()

        self.app.use(drop_replays)
        self.app.use(drop_redeliveries)

    # -- listeners ---------------------------------------------------------------------------
    def _on_message(self, event, context) -> None:
        if event.get("channel_type") == "im":  # channel mentions arrive as app_mention instead
            self._on_event(event, context)
        elif self.followups.wants(event, context.get("bot_user_id") or ""):  # the asker, in our thread
            self._on_event(event, context)

    def _on_event(self, event, context) -> None:
        bot_user = context.get("bot_user_id") or ""
        if event.get("bot_id") or event.get("subtype") not in ANSWERED_SUBTYPES or not event.get("user"):
            return  # bots, including this one, and message edits/joins
        if event["user"] == bot_user:
            return
        channel, ts = event["channel"], event["ts"]
        # Messages from integrations and some clients carry no client_msg_id: then the
        # channel and timestamp alone name the message ("msg:" would name them all).
        msg_id = event.get("client_msg_id")
        if not self._seen_messages.first_time(f"msg:{msg_id}" if msg_id else "", f"ts:{channel}:{ts}"):
            return  # the same message delivered as both app_mention and message.im
        thread_ts = event.get("thread_ts") or ts
        self._react(channel, ts, SEARCHING_REACTION, add=True)
        try:
            query, kept = self._asked(event)
            history = (
                self._history(channel, thread_ts, before=ts, bot_user=bot_user) if thread_ts != ts else []
            )
            for message in self._reply(query, history, kept):
                self._post(channel, thread_ts, message)
            self.followups.answered(channel, thread_ts, event["user"])
        finally:
            self._react(channel, ts, SEARCHING_REACTION, add=False)

    def _on_command(self, ack, command, respond) -> None:
        from slack_sdk.errors import SlackApiError

        from .blocks import escape

        query = slack_to_plain(command.get("text") or "")
        if not query:
            ack(text=USAGE)
            return
        ack()
        channel, user = command["channel_id"], command["user_id"]
        # A ``` in the question would close the code block it is shown in: a zero-width space
        # between its backticks keeps the block whole and the text as it reads.
        shown = escape(query[-2900:]).replace("```", "``\u200b`")
        try:
            # The question is posted for the channel to see; its metadata keeps the full text for
            # follow-ups in the thread (conversations.replies returns it).
            top = self.client.chat_postMessage(
                channel=channel,
                text=f"<@{user}> asked: {shown[:200]}",
                blocks=[
                    {
                        "type": "section",
                        "text": {"type": "mrkdwn", "text": f"<@{user}> asked:\n```{shown}```"},
                    }
                ],
                metadata={"event_type": "kb_question", "event_payload": {"text": query[-3000:]}},
                unfurl_links=False,
            )
            placeholder = self.client.chat_postMessage(
                channel=channel, thread_ts=top["ts"], text=":mag: searching..."
            )
        except SlackApiError as e:
            # Not a member of this channel (or a DM between other people): answer the asker privately.
            log.info(
                "cannot post in %s (%s); answering through response_url", channel, e.response.get("error")
            )
            for message in self._reply(query, []):
                respond(text=message["text"], blocks=message["blocks"], response_type="ephemeral")
            return
        messages = self._reply(query, [])
        self.followups.answered(channel, top["ts"], user)
        self.client.chat_update(
            channel=channel, ts=placeholder["ts"], text=messages[0]["text"], blocks=messages[0]["blocks"]
        )
        for message in messages[1:]:
            self._post(channel, top["ts"], message)

    # -- building the answer -----------------------------------------------------------------
    def _reply(self, query: str, history: list[tuple[str, str]], kept: Excerpt | None = None) -> list[dict]:
        """The answer's messages; `kept`: the part of a long paste that was searched, said first."""
        from .blocks import answer_messages, text_messages, with_note

        if not query.strip():
            return text_messages(USAGE)
        kb = self.live.get()
        try:
            answer = kb.ask(query, history=history)
        except KbError as e:  # too large, empty: the message says what to do
            return text_messages(str(e))
        except Exception:
            log.exception("answering failed")
            return text_messages(
                "Sorry, the knowledge base failed to answer this one; the error is in the bot's log."
            )
        messages = answer_messages(answer, kb.settings.docs_base_url, lookup=kb.entry)
        if kept is not None:
            messages = with_note(messages, kept_note(kept, answer.lang))
        return self.feedback.attach(messages, query, answer)

    def _asked(self, message: dict) -> tuple[str, Excerpt | None]:
        """The message as the query: its text and its attached logs whole (up to MAX_PASTE_BYTES),
        cut to the part that matters when over the query limit, as the chat cuts a paste (the
        log's tail alone loses its first error and its command line); and that part, when cut."""
        part = excerpt(self._message_query(message, MAX_PASTE_BYTES), self.live.kb.settings.max_query_bytes)
        return part.text, (part if part.cut else None)

    def _message_query(self, message: dict, limit: int | None = None) -> str:
        """The message's text plus the pasted logs attached to it, within `limit` bytes."""
        parts = [slack_to_plain(message.get("text") or "")]
        room = (limit or self.live.kb.settings.max_query_bytes) - len(parts[0].encode()) - 1024
        for f in (message.get("files") or [])[:MAX_FILES]:
            text = read_file(self.client, f.get("id", ""), room)
            if text:
                parts.append(text)
                room -= len(text.encode())
        return "\n".join(p for p in parts if p.strip())

    def _history(self, channel: str, thread_ts: str, before: str, bot_user: str) -> list[tuple[str, str]]:
        """The thread's earlier messages as (role, text): the user's own and the bot's answers."""
        from slack_sdk.errors import SlackApiError

        try:
            replies = self.client.conversations_replies(
                channel=channel, ts=thread_ts, limit=MAX_HISTORY_MESSAGES, include_all_metadata=True
            )
        except SlackApiError as e:
            log.warning("cannot read thread %s in %s: %s", thread_ts, channel, e.response.get("error"))
            return []
        history = []
        for m in replies.get("messages", []):
            if float(m.get("ts", 0)) >= float(before):
                continue
            meta = m.get("metadata") or {}
            if meta.get("event_type") == "kb_question":  # a /kb question the bot posted for the user
                history.append(("user", str(meta.get("event_payload", {}).get("text", ""))))
            elif m.get("bot_id") or m.get("user") == bot_user:
                history.append(("assistant", slack_to_plain(m.get("text") or "")))
            else:
                # kb.ask reads only the tail of earlier questions (contextual_query): fetch little.
                history.append(("user", self._message_query(m, limit=HISTORY_FILE_BYTES)))
        return [(role, text) for role, text in history if text.strip()]

    # -- Slack calls -------------------------------------------------------------------------
    def _post(self, channel: str, thread_ts: str, message: dict) -> None:
        from slack_sdk.errors import SlackApiError

        try:
            self.client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=message["text"],
                blocks=message["blocks"],
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as e:
            error = e.response.get("error")
            log.error("chat.postMessage in %s failed: %s", channel, error)
            if error in ("invalid_blocks", "invalid_blocks_format", "msg_too_long"):
                # Blocks Slack refuses should never hide the answer: send its plain text instead.
                self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=message["text"])

    def _react(self, channel: str, ts: str, name: str, add: bool) -> None:
        from slack_sdk.errors import SlackApiError

        try:
            if add:
                self.client.reactions_add(channel=channel, timestamp=ts, name=name)
            else:
                self.client.reactions_remove(channel=channel, timestamp=ts, name=name)
        except SlackApiError as e:  # already_reacted, no_reaction: cosmetic, never worth failing for
            log.debug("reaction %s: %s", name, e.response.get("error"))

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait for answers in flight (graceful shutdown; tests)."""
        return self.executor.wait_idle(timeout)

    def close(self, timeout: float = 10.0) -> None:
        self.wait_idle(timeout)
        self.executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["SlackBot"]
