"""manifest.yml, Cairn's Slack app manifest: valid by Slack's own schema, and asking for what
Cairn needs (the scopes, the events, the /cairn command) in Socket Mode."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).parents[2]
MANIFEST = REPO / "manifest.yml"
# CI clones the repository next to a copy of shared/; a bare clone has only the copy in tests/.
SHARED_SCHEMAS = REPO.parent / "shared" / "data" / "slack"
REPO_SCHEMAS = REPO / "tests" / "data" / "slack"
SCHEMA_FILES = ("manifest.schema.1.0.0.json", "manifest.schema.2.0.0.json", "LICENSE")

REQUIRED_BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "reactions:read",
    "reactions:write",
    "users:read",
    # conversations.info, which says whether a conversation is public (memory privacy)
    "channels:read",
    "groups:read",
    "im:read",
    "mpim:read",
    "assistant:write",
    "commands",
    "files:read",  # files shared with the bot (docs/adr/0040)
    "usergroups:read",  # members of the steward user groups (docs/adr/0035)
)
REQUIRED_BOT_EVENTS = (
    "app_mention",
    "message.channels",
    "message.groups",
    "message.im",
    "reaction_added",
    "reaction_removed",
    "app_home_opened",
    "app_uninstalled",
    "tokens_revoked",
    "channel_shared",
    "channel_unshared",
    "channel_id_changed",
)
# The bot scope Slack requires before it delivers each event (Slack's event reference); events
# missing here (app_home_opened, app_uninstalled, tokens_revoked) need none.
SCOPE_FOR_EVENT = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
    "reaction_added": "reactions:read",
    "reaction_removed": "reactions:read",
    "assistant_thread_started": "assistant:write",
    "assistant_thread_context_changed": "assistant:write",
    "channel_shared": "channels:read",
    "channel_unshared": "channels:read",
    "channel_rename": "channels:read",
    "channel_id_changed": "channels:read",
    "channel_archive": "channels:read",
    "group_rename": "groups:read",
    "group_archive": "groups:read",
}


def _schema_dir() -> Path:
    return SHARED_SCHEMAS if SHARED_SCHEMAS.is_dir() else REPO_SCHEMAS


def _validator_for(manifest: dict[str, Any]) -> jsonschema.protocols.Validator:
    # Slack picks the schema by _metadata.major_version, 1 when absent.
    major = manifest.get("_metadata", {}).get("major_version", 1)
    path = _schema_dir() / f"manifest.schema.{major}.0.0.json"
    assert path.is_file(), f"manifest.yml asks for schema {major}.0.0, but {path} does not exist"
    schema = json.loads(path.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _schema_errors(manifest: dict[str, Any]) -> list[str]:
    errors = _validator_for(manifest).iter_errors(manifest)
    return [f"{err.json_path}: {err.message}" for err in sorted(errors, key=str)]


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    loaded = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), "manifest.yml must be a YAML mapping"
    return loaded


def test_manifest_is_valid_by_slacks_schema(manifest: dict[str, Any]) -> None:
    errors = _schema_errors(manifest)
    assert not errors, "manifest.yml breaks Slack's manifest schema:\n" + "\n".join(errors)


def test_the_schema_check_catches_a_broken_manifest(manifest: dict[str, Any]) -> None:
    # Guards the test above against validating nothing (a wrong schema file, a lost $ref).
    broken = copy.deepcopy(manifest)
    broken["features"]["slash_commands"][0]["command"] = "cairn"  # no leading slash
    broken["settings"]["socket_mode"] = True  # not a Slack setting
    errors = _schema_errors(broken)
    assert any("slash_commands" in e for e in errors), errors
    assert any("socket_mode" in e for e in errors), errors


def test_background_color_is_a_hex_colour(manifest: dict[str, Any]) -> None:
    # Slack's schema states this with the keyword "regex", which JSON Schema does not know,
    # so jsonschema never checks it; Slack's API does.
    color = manifest["display_information"]["background_color"]
    assert re.fullmatch(r"#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?", color), (
        f"background_color must be #rgb or #rrggbb, got {color!r}"
    )


def test_the_app_is_named_cairn_with_a_bot_user_cairn(manifest: dict[str, Any]) -> None:
    assert manifest["display_information"]["name"] == "Cairn"
    assert manifest["features"]["bot_user"]["display_name"] == "cairn"


@pytest.mark.parametrize("scope", REQUIRED_BOT_SCOPES)
def test_bot_scope_is_requested(manifest: dict[str, Any], scope: str) -> None:
    requested = manifest["oauth_config"]["scopes"]["bot"]
    assert scope in requested, f"oauth_config.scopes.bot must request {scope!r}"


@pytest.mark.parametrize("event", REQUIRED_BOT_EVENTS)
def test_bot_event_is_subscribed(manifest: dict[str, Any], event: str) -> None:
    subscribed = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert event in subscribed, f"settings.event_subscriptions.bot_events must include {event!r}"


def test_every_subscribed_event_has_the_scope_slack_requires(manifest: dict[str, Any]) -> None:
    requested = set(manifest["oauth_config"]["scopes"]["bot"])
    missing = {
        event: SCOPE_FOR_EVENT[event]
        for event in manifest["settings"]["event_subscriptions"]["bot_events"]
        if event in SCOPE_FOR_EVENT and SCOPE_FOR_EVENT[event] not in requested
    }
    assert not missing, f"events subscribed without the scope Slack requires: {missing}"


def test_each_history_scope_comes_with_its_message_event(manifest: dict[str, Any]) -> None:
    # A history scope without its message.* event grants reading that Cairn never receives.
    requested = set(manifest["oauth_config"]["scopes"]["bot"])
    subscribed = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    unused = {
        scope: event
        for event, scope in SCOPE_FOR_EVENT.items()
        if event.startswith("message.") and scope in requested and event not in subscribed
    }
    assert not unused, f"history scopes requested without their message event: {unused}"


def test_the_one_slash_command_is_cairn(manifest: dict[str, Any]) -> None:
    commands = manifest["features"]["slash_commands"]
    assert [c["command"] for c in commands] == ["/cairn"]
    assert commands[0]["usage_hint"] == (
        "help | remember <fact> | recall <query> | forget <fact> | status"
    )
    assert "commands" in manifest["oauth_config"]["scopes"]["bot"], "slash commands need it"


def test_people_can_message_the_bot_directly(manifest: dict[str, Any]) -> None:
    app_home = manifest["features"]["app_home"]
    assert app_home["messages_tab_enabled"] is True
    assert app_home["messages_tab_read_only_enabled"] is False
    assert "message.im" in manifest["settings"]["event_subscriptions"]["bot_events"]


def test_socket_mode_is_on_and_no_request_url_is_set(manifest: dict[str, Any]) -> None:
    # In Socket Mode everything arrives over the socket; a request URL would suggest otherwise
    # (and Slack would ask to verify it). The header of manifest.yml says how to switch to HTTP.
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True
    urls = {
        "settings.event_subscriptions.request_url": settings["event_subscriptions"].get(
            "request_url"
        ),
        "settings.interactivity.request_url": settings["interactivity"].get("request_url"),
        **{
            f"features.slash_commands[{c['command']}].url": c.get("url")
            for c in manifest["features"]["slash_commands"]
        },
    }
    assert not {k: v for k, v in urls.items() if v}, f"request URLs set in Socket Mode: {urls}"


def test_org_deploy_and_token_rotation_are_off(manifest: dict[str, Any]) -> None:
    assert manifest["settings"]["org_deploy_enabled"] is False
    assert manifest["settings"]["token_rotation_enabled"] is False


@pytest.mark.skipif(not SHARED_SCHEMAS.is_dir(), reason="no shared/ beside this clone")
@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_the_schema_copy_in_the_repository_matches_shared(name: str) -> None:
    assert (REPO_SCHEMAS / name).read_bytes() == (SHARED_SCHEMAS / name).read_bytes(), (
        f"tests/data/slack/{name} differs from shared/data/slack/{name}: copy it again"
    )


def test_the_repository_keeps_its_own_copy_of_the_schemas_and_licence() -> None:
    missing = [name for name in SCHEMA_FILES if not (REPO_SCHEMAS / name).is_file()]
    assert not missing, f"tests/data/slack/ lacks {missing}; the tests need them without shared/"
