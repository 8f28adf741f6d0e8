"""Which Matrix users are trusted and which are room admins, from ids and power levels."""

from __future__ import annotations

from nio import MatrixRoom
from nio.events.room_events import DefaultLevels, PowerLevels

from cairn.bot.matrix.trust import creators_in, is_room_admin, is_untrusted
from cairn.core.settings import load_settings


def test_users_of_servers_outside_the_trusted_ones_are_untrusted() -> None:
    trusted = ("example.org", "partner.test")
    assert not is_untrusted("@ann:example.org", trusted)
    assert not is_untrusted("@bob:partner.test", trusted)
    assert is_untrusted("@eve:elsewhere.test", trusted)
    assert is_untrusted("not-a-user-id", trusted)
    assert not is_untrusted("@eve:elsewhere.test", ("*",))


def test_the_bots_own_server_is_always_trusted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MATRIX_HOMESERVER", "http://127.0.0.1:8008")
    monkeypatch.setenv("MATRIX_USER_ID", "@cairn:example.org")
    monkeypatch.setenv("MATRIX_PASSWORD", "secret")
    assert load_settings().matrix.trusted == ("example.org",)
    monkeypatch.setenv("CAIRN_MATRIX_TRUSTED_SERVERS", "partner.test, example.org")
    assert load_settings().matrix.trusted == ("example.org", "partner.test")


def _room(users: dict[str, int], redact: int = 50, version: str = "10") -> MatrixRoom:
    room = MatrixRoom("!r:example.org", "@cairn:example.org")
    room.room_version = version
    room.power_levels = PowerLevels(defaults=DefaultLevels(redact=redact), users=users)
    return room


def test_moderators_and_admins_are_room_admins_and_others_are_not() -> None:
    room = _room({"@boss:example.org": 100, "@mod:example.org": 50, "@ann:example.org": 10})
    assert is_room_admin(room, "@boss:example.org")
    assert is_room_admin(room, "@mod:example.org")
    assert not is_room_admin(room, "@ann:example.org")
    assert not is_room_admin(room, "@stranger:example.org")


def test_a_room_that_lets_lower_levels_redact_lets_them_retract() -> None:
    room = _room({"@ann:example.org": 10}, redact=10)
    assert is_room_admin(room, "@ann:example.org")
    assert not is_room_admin(room, "@bob:example.org")


def test_creators_of_a_version_12_room_are_admins_without_power_levels() -> None:
    state = [
        {"type": "m.room.member", "state_key": "@ann:example.org", "sender": "@ann:example.org"},
        {
            "type": "m.room.create",
            "state_key": "",
            "sender": "@boss:example.org",
            "content": {"room_version": "12", "additional_creators": ["@co:example.org"]},
        },
    ]
    creators = creators_in(state)
    assert creators == {"@boss:example.org", "@co:example.org"}
    assert is_room_admin(_room({}, version="12"), "@boss:example.org", creators)
    assert is_room_admin(_room({}, version="12"), "@co:example.org", creators)
    assert not is_room_admin(_room({}, version="12"), "@ann:example.org", creators)
    # Before version 12 the power levels alone decide, even for a creator.
    assert not is_room_admin(_room({}, version="11"), "@boss:example.org", creators)
