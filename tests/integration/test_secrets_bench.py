"""``cairn bench secrets`` as a person runs it: on a corpus of our own, through the real turn,
memos, session end and export on a scratch runtime, it counts exactly the credentials that
survive and where, and refuses a malformed corpus clearly."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cairn.bench.logcapture import captured_logs
from cairn.bench.secrets import load_corpus
from cairn.cli import main
from cairn.core.errors import InvalidInput

SLACK_TOKEN = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
# A pass phrase said with no word for it: no detector can know it is one, so it is kept as
# said, which proves the bench counts what survives.
PHRASE = "tangerine octopus"
DOCS_TOKEN = "xoxb-999999999999-9999999999999-DocsExampleDocsExample12"

CORPUS: list[dict[str, Any]] = [
    {
        "id": "slack-bot-token",
        "kind": "secret",
        "class": "slack",
        "lang": "en",
        "messages": [f"the bot token is {SLACK_TOKEN}"],
        "secret": [SLACK_TOKEN],
    },
    {
        "id": "spoken-phrase",
        "kind": "secret",
        "class": "phrase",
        "lang": "en",
        "messages": [f"to open the roof door say {PHRASE} to the guard"],
        "secret": [PHRASE],
    },
    {
        "id": "freeze",
        "kind": "honest",
        "class": "ops",
        "lang": "en",
        "messages": ["deploys are frozen until Monday", "ask ann before merging anything"],
        "secret": [],
    },
    {
        # Labelled honest, yet it holds a token any detector masks: it must count as masked.
        "id": "docs-token",
        "kind": "honest",
        "class": "ops",
        "lang": "en",
        "messages": [f"the docs show the token {DOCS_TOKEN} as an example"],
        "secret": [],
    },
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "secrets.json"
    path.write_text(json.dumps(CORPUS), encoding="utf-8")
    return path


def test_the_bench_counts_each_place_a_credential_survives(clean_env: Path, corpus: Path) -> None:
    result = CliRunner().invoke(
        main, ["bench", "secrets", "--corpus", str(corpus), "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    # The Slack token is masked everywhere, its memo included; the phrase is remembered,
    # posted and exported as said, and so is in the database file.
    assert json.loads(result.stdout) == {
        "cases": 2,
        "held": 1,
        "leaked": {
            "memory": 1,
            "session_log": 1,
            "replies": 1,
            "export": 1,
            "logs": 0,
            "files": 1,
        },
        "honest": 2,
        "honest_masked": 1,
    }
    assert not (clean_env / "cairn.db").exists()  # a scratch store, never CAIRN_HOME's


def test_the_report_names_what_to_fix_without_showing_a_secret(
    clean_env: Path, corpus: Path
) -> None:
    result = CliRunner().invoke(
        main, ["bench", "secrets", "--corpus", str(corpus)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "held:            1 (50.0%; target at least 95%)" in lines
    assert (
        "  leaked: spoken-phrase (phrase; secret tang…) in memory, session_log, replies, export, "
        "files (bench.db, export.jsonl)" in lines
    )
    assert not any(line.startswith("  leaked: slack-bot-token") for line in lines)
    assert any(
        line.startswith(
            "  honest masked: docs-token (ops): remember the docs show the token [secret removed:"
        )
        for line in lines
    )
    for secret in (SLACK_TOKEN, PHRASE, DOCS_TOKEN):
        assert secret not in result.output


def test_only_and_limit_choose_the_entries(clean_env: Path, corpus: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["bench", "secrets", "--corpus", str(corpus), "--only", "ops", "--limit", "1", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert (figures["cases"], figures["honest"], figures["honest_masked"]) == (0, 1, 0)


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ({"id": "x"}, "must be a JSON list of entries"),
        ([["not", "an", "object"]], "entry 0: is not a JSON object"),
        ([{**CORPUS[2], "id": ""}], 'entry 0: needs an "id", a non-empty string'),
        ([CORPUS[2], CORPUS[2]], "entry 'freeze': has the id of an earlier entry"),
        ([{**CORPUS[2], "kind": "maybe"}], 'entry \'freeze\': needs "kind": "secret" or "honest"'),
        ([{**CORPUS[2], "lang": None}], "entry 'freeze': needs \"lang\", a non-empty string"),
        (
            [{**CORPUS[2], "messages": ["a", "b", "c"]}],
            "entry 'freeze': needs \"messages\": a list of 1 or 2 non-empty strings",
        ),
        ([{**CORPUS[2], "secret": ["deploys"]}], "entry 'freeze': is honest"),
        ([{**CORPUS[0], "secret": []}], "entry 'slack-bot-token': is a secret entry"),
        (
            [{**CORPUS[1], "secret": [PHRASE, "Summer2023!"]}],
            "entry 'spoken-phrase': secret string 1 is in none of its messages",
        ),
        (
            [{**CORPUS[1], "secret": ["say"]}],
            "entry 'spoken-phrase': secret string 0 is shorter than 4 characters",
        ),
    ],
)
def test_a_malformed_corpus_is_refused_naming_the_entry(
    tmp_path: Path, entries: Any, error: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    with pytest.raises(InvalidInput) as refused:
        load_corpus(path)
    assert error in str(refused.value)
    assert str(path) in str(refused.value)
    assert "Summer2023!" not in str(refused.value)  # a wrong secret string is never shown


def test_a_malformed_corpus_stops_the_command_with_one_clear_line(
    clean_env: Path, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[{", encoding="utf-8")
    result = CliRunner().invoke(main, ["bench", "secrets", "--corpus", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith(f"cairn: {path} is not JSON: ")


def test_the_logs_are_searched_as_cairn_writes_them() -> None:
    log = logging.getLogger("cairn.test.bench")
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    with captured_logs() as lines:
        log.debug("the roof door opens with %s", PHRASE)
        log.warning("the bot token is %s", SLACK_TOKEN)
    assert [json.loads(line)["level"] for line in lines] == ["debug", "warning"]
    assert PHRASE in lines[0]  # written as said: no detector can know it
    assert SLACK_TOKEN not in lines[1]  # masked by the handler's redaction, as in production
    assert (root.level, root.handlers) == (level, handlers)  # put back as they were


def test_the_shipped_corpus_is_well_formed_and_packaged() -> None:
    entries = load_corpus()
    assert {e.kind for e in entries} == {"secret", "honest"}
    assert len(entries) >= 300
