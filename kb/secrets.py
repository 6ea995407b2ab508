"""Nothing secret is kept: what a person pasted (a log with a token in a command line, a URL with
a password) is scrubbed before the feedback store writes it, and so before `kb feedback list`
and `export` show it. Every pattern is bounded, so a long hostile paste is scrubbed in linear time.
"""

from __future__ import annotations

import os
import re

from .config import redact_urls

_SECRET_SHAPES = re.compile(
    r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]{8,}"  # Slack tokens
    r"|\bsk-[A-Za-z0-9_-]{16,}"  # OpenAI-style API keys
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bhf_[A-Za-z0-9]{20,}"  # Hugging Face tokens (ms-swift's --hub_token, huggingface-cli login)
    r"|\bglpat-[A-Za-z0-9_-]{20,}"  # GitLab tokens
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/-]{12,}=*"
)
# A secret given as an argument: `--hub_token X`, `--api-key X`, `--password X`, `wandb login X`.
# The flag's name is checked by its parts (`--tokenizer_path` is no token); bounded, so linear.
_FLAG_VALUE = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]{0,60})([ \t]+)(?![-\[])([^\s\"',;]{6,})")
_SECRET_FLAG_PART = frozenset("token key secret password passwd apikey".split())
_WANDB_LOGIN = re.compile(r"\b(wandb[ \t]+login[ \t]+(?:--[\w-]{1,30}[ \t]+){0,3})(?![-\[])[^\s\"',;]{6,}")


def _secret_flag(m: re.Match) -> str:
    parts = re.split(r"[-_]+", m.group(1).lower())
    return f"{m.group(1)}{m.group(2)}[redacted]" if _SECRET_FLAG_PART & set(parts) else m.group(0)


# Names are bounded: unbounded, `--a-` repeated 5,000 times took 10 s to scrub (each start
# scanned the rest of the run for the keyword).
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]{0,40}(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|credential)[\w.-]{0,40}"
    r"[\"']?[ \t]*[=:][ \t]*[\"']?)[^\s\"',;]+"
)
_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.I)


def scrub(text: str) -> str:
    """`text` without what looks like a secret: tokens and keys by their shape, `password=...`
    style assignments, `--hub_token X` style arguments and `wandb login X`, credentials in URLs,
    and the values of this process's secret variables."""
    for name, value in os.environ.items():
        if _SECRET_ENV_NAME.search(name) and len(value.strip()) >= 8:
            text = text.replace(value.strip(), "[redacted]")
    text = _SECRET_SHAPES.sub("[redacted]", text)
    text = _SECRET_ASSIGNMENT.sub(r"\1[redacted]", text)
    text = _FLAG_VALUE.sub(_secret_flag, text)
    text = _WANDB_LOGIN.sub(r"\1[redacted]", text)
    return redact_urls(text)
