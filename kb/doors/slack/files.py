"""Pasted logs attached to Slack messages: files.info, then the file's url_private downloaded
with the bot token (the files:read scope). Only text files are read, up to the byte budget the
caller gives (keeping the tail beyond it): the asked message's logs whole up to MAX_PASTE_BYTES,
then cut to the part that matters as the chat cuts a paste (kb/doors/slack/bot.py `_asked`); an
earlier message's logs in a thread, their tail only.

The bot token goes only to Slack's hosts (files.slack.com and the Web API's host), redirects
included. slack_sdk is imported inside the functions.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from ...errors import KbError

log = logging.getLogger("kb.slack")

MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024  # stop reading a file after this; its tail is what we keep
TEXT_EXTENSIONS = (".log", ".txt", ".out", ".err", ".md", ".py", ".sh", ".json", ".yaml", ".yml", ".csv")
TEXT_FILETYPES = {"text", "log", "txt", "python", "shell", "json", "yaml", "markdown", "csv", "diff", "post"}


def is_text_file(info: dict) -> bool:
    name = (info.get("name") or info.get("title") or "").lower()
    return (
        (info.get("mimetype") or "").startswith("text/")
        or (info.get("filetype") or "").lower() in TEXT_FILETYPES
        or name.endswith(TEXT_EXTENSIONS)
    )


def read_file(client, file_id: str, room: int) -> str:
    """The last `room` bytes of a pasted text file as text; "" when it cannot or should not be
    read (not text, no access, Slack errors): the question is still answered from its text."""
    from slack_sdk.errors import SlackApiError

    from ingest.read import UnreadableFile, decode

    if not file_id or room <= 0:
        return ""
    try:
        info = client.files_info(file=file_id)["file"]
    except SlackApiError as e:
        log.warning("files.info %s failed: %s", file_id, e.response.get("error"))
        return ""
    url = info.get("url_private_download") or info.get("url_private")
    if not url or not is_text_file(info):
        return ""
    try:
        data = download(client, url, room)
        return decode(data)
    except (OSError, UnreadableFile, KbError) as e:
        log.warning("cannot read file %s (%s): %s", file_id, info.get("name"), e)
        return ""


def download(client, url: str, keep: int) -> bytes:
    """The last `keep` bytes of `url` (at most MAX_DOWNLOAD_BYTES read), cut at a line start."""
    import urllib.request

    allowed = {"files.slack.com", urlsplit(client.base_url).hostname}
    if urlsplit(url).hostname not in allowed:
        raise KbError(f"refusing to send the bot token to {urlsplit(url).hostname}")

    class SameHostRedirects(urllib.request.HTTPRedirectHandler):
        # urllib copies the Authorization header into redirects; never let it leave Slack's hosts.
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            if urlsplit(newurl).hostname not in allowed:
                raise OSError(f"file download redirected to {urlsplit(newurl).hostname}")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    opener = urllib.request.build_opener(SameHostRedirects())
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {client.token}"})
    tail = bytearray()
    total = 0
    with opener.open(request, timeout=15) as resp:
        if "text/html" in (resp.headers.get("Content-Type") or ""):
            raise KbError("Slack answered with a web page: the bot token lacks the files:read scope")
        while total < MAX_DOWNLOAD_BYTES:
            chunk = resp.read(65536)
            if not chunk:
                break
            total += len(chunk)
            tail += chunk
            if len(tail) > keep:
                del tail[: len(tail) - keep]
    if total > len(tail):  # cut at a line start so no half character or half line leads
        cut = tail.find(b"\n")
        tail = tail[cut + 1 :] if cut >= 0 else tail
    return bytes(tail)
