"""Reading a Slack workspace export: conversations and their privacy, one day file at a time,
edits, threads, noise, and a malformed file refused with its path and line."""

from __future__ import annotations

import json
import zipfile
from datetime import date
from pathlib import Path

import pytest

from cairn.bot.slack.export import MalformedExport, SlackExport
from cairn.core.errors import InvalidInput
from tests.support.slack_export import DECISION, TEAM, write_export


@pytest.fixture
def export_zip(tmp_path: Path) -> Path:
    path = tmp_path / "export.zip"
    write_export(path)
    return path


def test_only_a_listed_public_channel_is_public(export_zip: Path) -> None:
    with SlackExport(export_zip) as export:
        kinds = {c.name: (c.kind, c.private) for c in export.conversations.values()}
        assert export.team == TEAM
    assert kinds["general"] == ("channel", False)
    assert kinds["team-1"] == ("channel", False)
    assert kinds["secret-ops"] == ("group", True)
    assert kinds["D00000000"] == ("im", True)
    assert kinds["mpdm-alice--bob--carol-1"] == ("mpim", True)


def test_a_folder_no_listing_names_is_private(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("users.json", "[]")
        zf.writestr("mystery/2026-01-05.json", json.dumps([{"ts": "1.0", "user": "U1"}]))
    with SlackExport(path) as export:
        (day,) = export.days()
    assert day.conversation.private


def test_a_channel_shared_with_another_organisation_is_private_to_itself(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    listed = [{"id": "C1", "name": "partners", "is_ext_shared": True}, {"id": "C2", "name": "ops"}]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("channels.json", json.dumps(listed))
    with SlackExport(path) as export:
        partners, ops = export.conversations["partners"], export.conversations["ops"]
    assert (partners.private, partners.shared) == (True, True)
    assert (ops.private, ops.shared) == (False, False)


def test_a_guest_and_a_bot_user_are_outsiders(export_zip: Path) -> None:
    with SlackExport(export_zip) as export:
        assert not export.people["U01ALICE"].outsider
        assert export.people["U03GUEST"].outsider
        assert export.people["U04BOTUSER"].outsider
        assert export.names["U02BOB"] == "bob"


def test_days_are_chosen_by_channel_and_date(export_zip: Path) -> None:
    with SlackExport(export_zip) as export:
        days = export.days(["secret-ops", "C00000000"], date(2026, 1, 6), date(2026, 1, 6))
        with pytest.raises(InvalidInput, match="no channel nope"):
            export.days(["nope"])
    assert [d.member for d in days] == ["general/2026-01-06.json", "secret-ops/2026-01-06.json"]


def test_messages_keep_their_thread_their_last_text_and_their_files(export_zip: Path) -> None:
    with SlackExport(export_zip) as export:
        (day,) = export.days(["general"], until=date(2026, 1, 5))
        messages = export.messages(day)
    by_line = {m.ts: m for m in messages}
    assert messages[0].noise == "join"
    assert messages[1].text == DECISION
    assert sum(m.noise == "bot" for m in messages) == 2
    replies = [m for m in messages if m.thread != m.ts]
    assert replies
    assert all(by_line[r.thread].noise is None for r in replies)
    assert any(m.text.endswith("(corrected)") for m in messages)
    assert any("[shared: " in m.text for m in messages)


def test_a_message_changed_event_gives_its_message_the_new_text(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    day = [
        {"type": "message", "ts": "100.000001", "user": "U1", "text": "the port is 80"},
        {
            "type": "message",
            "subtype": "message_changed",
            "ts": "101.000000",
            "message": {"type": "message", "ts": "100.000001", "user": "U1", "text": "443"},
        },
    ]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("general/2026-01-05.json", json.dumps(day))
    with SlackExport(path) as export:
        (only,) = export.messages(export.days()[0])
    assert (only.ts, only.text) == ("100.000001", "443")


def test_a_malformed_day_file_is_refused_with_its_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    write_export(path, malformed="team-1/2026-01-06.json")
    with SlackExport(path) as export:
        (day,) = export.days(["team-1"], date(2026, 1, 6), date(2026, 1, 6))
        with pytest.raises(MalformedExport, match=r"^team-1/2026-01-06\.json, line 4, column"):
            export.messages(day)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"ts": "1.0"}', r"general/2026-01-05\.json, line 1: not a JSON array"),
        ('[\n  {"ts": "1.0", "user": "U1"},\n  "hello"\n]', r"line 3: not a JSON object"),
        ('[\n  {"user": "U1", "text": "no ts"}\n]', r"line 2: a message without a valid ts"),
        ('[\n  {"ts": "1.0"}\n  {"ts": "2.0"}\n]', r"line 3: expected ',' or '\]'"),
        ("[]\n]", r"line 2: text after the JSON array"),
    ],
)
def test_a_day_file_of_the_wrong_shape_names_the_line(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("general/2026-01-05.json", content)
    with SlackExport(path) as export, pytest.raises(MalformedExport, match=expected):
        export.messages(export.days()[0])


def test_a_malformed_listing_is_refused_when_the_export_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("channels.json", '[\n  {"name": "general"}\n]')
    with pytest.raises(MalformedExport, match=r"channels\.json, line 2: .* without an id"):
        SlackExport(path)


def test_a_file_that_is_not_a_zip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    path.write_text("not a zip")
    with pytest.raises(InvalidInput, match="not a readable zip"):
        SlackExport(path)
