"""Logging for the doors that serve: one set-up, with every secret masked in every line."""

from __future__ import annotations

import logging
import os
import re
import sys

from ...config import redact_urls


class SecretMask(logging.Formatter):
    """Formats log lines with the given secret values replaced, tracebacks included (an error
    message may quote a request's headers)."""

    def __init__(self, fmt: str, secrets: list[str]) -> None:
        super().__init__(fmt)
        # Longest first, so a secret that contains another is masked whole.
        self.secrets = sorted(set(secrets), key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return redact_urls(text)  # user:password@ in any URL (KB_LLM_BASE_URL), ?api_key=...


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.I)  # OPENAI_API_KEY, SLACK_BOT_TOKEN, ...


def configure_logging(key_env: str = "") -> None:
    """The server's log on stderr: kb.* at INFO (LLM failures and fallbacks, index reloads, chat
    errors), libraries at WARNING (httpx would log every request to the model at INFO). The values
    of `key_env` and of every variable named like a secret are masked in every line."""
    names = {n for n in os.environ if _SECRET_NAME.search(n)} | ({key_env} if key_env else set())
    secrets = [v for n in names if len(v := os.environ.get(n, "").strip()) >= 8]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SecretMask("%(asctime)s %(levelname)s %(name)s: %(message)s", secrets))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])  # no-op if the host set one up
    logging.getLogger("kb").setLevel(logging.INFO)
