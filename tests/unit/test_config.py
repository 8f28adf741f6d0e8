"""The settings model: defaults, sources and their precedence, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.core.errors import ConfigError
from cairn.core.reactions import reaction_effect
from cairn.core.settings import load_settings


def test_embedded_default_needs_no_setting(clean_env: Path) -> None:
    s = load_settings()
    assert s.home_dir == clean_env
    assert s.effective_database_url == f"sqlite:///{clean_env / 'cairn.db'}"
    assert s.qdrant_path == clean_env / "qdrant"
    assert s.broker_url is None
    assert s.llm.provider == "offline"


def test_cairn_home_defaults_to_dot_cairn_in_the_home_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CAIRN_HOME")
    assert load_settings().home_dir == Path("~/.cairn").expanduser()


def test_environment_wins_over_cairn_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cairn.toml").write_text('cairn_model = "from-file"\ncairn_recall_k = 9\n')
    monkeypatch.setenv("CAIRN_MODEL", "from-env")
    s = load_settings()
    assert s.llm.model == "from-env"
    assert s.memory.recall_k == 9


def test_cairn_config_names_the_file_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text('cairn_agent = "ops"\n')
    monkeypatch.setenv("CAIRN_CONFIG", str(path))
    assert load_settings().agent == "ops"


def test_a_missing_config_file_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_CONFIG", "/nonexistent/cairn.toml")
    with pytest.raises(ConfigError, match="CAIRN_CONFIG"):
        load_settings()


def test_an_api_key_selects_the_anthropic_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert load_settings().llm.provider == "anthropic"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CAIRN_CONTEXT_BUDGET": "lots"}, "CAIRN_CONTEXT_BUDGET"),
        ({"CAIRN_DATABASE_URL": "mysql://x/y"}, "CAIRN_DATABASE_URL"),
        ({"CAIRN_BROKER_URL": "amqp://guest@localhost//"}, "CAIRN_BROKER_URL"),
        ({"CAIRN_QDRANT_URL": "localhost:6333"}, "CAIRN_QDRANT_URL"),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_APP_TOKEN"),
        ({"SLACK_APP_TOKEN": "xapp-1"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxp-1", "SLACK_SIGNING_SECRET": "s"}, "SLACK_BOT_TOKEN"),
        ({"MATRIX_HOMESERVER": "http://127.0.0.1:8008"}, "MATRIX_USER_ID"),
        ({"MATRIX_HOMESERVER": "http://h", "MATRIX_USER_ID": "bot"}, "MATRIX_USER_ID"),
        ({"MATRIX_HOMESERVER": "http://h", "MATRIX_USER_ID": "@b:h"}, "MATRIX_PASSWORD"),
        ({"CAIRN_LLM": "anthropic"}, "ANTHROPIC_API_KEY"),
        ({"CAIRN_LLM": "gpt"}, "CAIRN_LLM"),
    ],
)
def test_bad_or_contradictory_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=named):
        load_settings()


def test_complete_slack_and_matrix_settings_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_APP_TOKEN": "xapp-1",
        "MATRIX_HOMESERVER": "http://127.0.0.1:8008",
        "MATRIX_USER_ID": "@cairn:localhost",
        "MATRIX_ACCESS_TOKEN": "syt_x",
    }.items():
        monkeypatch.setenv(key, value)
    s = load_settings()
    assert s.slack.app_token is not None
    assert s.matrix.user_id == "@cairn:localhost"


def test_redacted_view_never_shows_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-very-secret")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing-secret")
    shown = load_settings().redacted()
    assert shown["ANTHROPIC_API_KEY"] == "***"
    values = repr(list(shown.values()))
    for secret in ("sk-very-secret", "xoxb-secret", "signing-secret"):
        assert secret not in values


def test_reaction_mapping_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_USEFUL_EMOJI", '["rocket"]')
    s = load_settings()
    assert reaction_effect("rocket", s) == "useful"
    assert reaction_effect("+1", s) is None
    assert reaction_effect("x", s) == "retract"


def test_passwords_in_urls_are_masked_in_the_redacted_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_DATABASE_URL", "postgresql://cairn:hunter2@db:5432/cairn")
    monkeypatch.setenv("CAIRN_BROKER_URL", "redis://:s3cret@redis:6379/0")
    shown = load_settings().redacted()
    assert shown["CAIRN_DATABASE_URL"] == "postgresql://cairn:***@db:5432/cairn"
    assert shown["CAIRN_BROKER_URL"] == "redis://:***@redis:6379/0"
