"""A request for approval as Slack blocks, and a click read from its interactivity payload:
what a person sees can't be bent by the arguments, and a click that does not name a request
is refused with words a person can read."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.bot.slack.approval_blocks import decided_blocks, request_blocks
from cairn.bot.slack.approval_clicks import BadClick, click_key, read_click
from cairn.core.settings import Settings
from tests.support.slack_api import block_actions_payload

DATA: dict[str, Any] = {
    "approval": 7,
    "tool": "ops__restart_service",
    "arguments": {"service": "payments"},
    "requested_by": "UANN",
    "expires_at": "2026-12-02T20:15:00+00:00",
    "approvers": "workspace or room admins",
}
REQUEST = {"ts": "1800000002.000100", "channel": "C0OPS", "thread_ts": "1700000700.000100"}


def _section(blocks: list[dict[str, Any]]) -> str:
    return str(blocks[0]["text"]["text"])


def test_the_expiry_is_shown_in_each_readers_time_zone_with_utc_as_fallback(
    settings: Settings,
) -> None:
    context = request_blocks(DATA, settings)[1]["elements"][0]["text"]
    assert "<!date^1796242500^{date_short_pretty} at {time}|2026-12-02 20:15 UTC>" in context


def test_arguments_cannot_mention_people_or_close_the_code_block(settings: Settings) -> None:
    sneaky = {**DATA, "arguments": {"note": "<!channel> ``` *bold* <@U1>"}}
    text = _section(request_blocks(sneaky, settings))
    assert "<!channel>" not in text
    assert "<@U1>" not in text
    assert "&lt;!channel&gt;" in text
    assert text.count("```") == 2  # the fence the request opens, and the one that closes it


def test_long_arguments_are_cut_to_fit_a_section(settings: Settings) -> None:
    long = {**DATA, "arguments": {"blob": "x" * 10_000}}
    text = _section(request_blocks(long, settings))
    assert len(text) <= 3000
    assert "…" in text


def test_a_requester_who_is_not_a_slack_user_is_shown_as_text(settings: Settings) -> None:
    text = _section(request_blocks({**DATA, "requested_by": "ann <ops>"}, settings))
    assert "Asked by ann &lt;ops&gt;" in text


def test_a_decided_request_keeps_what_it_asked_and_loses_its_buttons(settings: Settings) -> None:
    blocks = decided_blocks(DATA, settings, "Approved by <@UADMIN>")
    assert [b["type"] for b in blocks] == ["section", "context", "context"]
    assert blocks[-1]["elements"][0]["text"] == "Approved by <@UADMIN>"
    assert _section(blocks) == _section(request_blocks(DATA, settings))


def test_a_click_names_the_request_its_thread_and_its_own_id() -> None:
    payload = block_actions_payload(REQUEST, "cairn_deny", "7", user="UBOB", action_ts="17.5")
    click = read_click(payload)
    assert (click.team, click.channel, click.user) == ("T0001", "C0OPS", "UBOB")
    assert (click.thread, click.message_ts) == ("1700000700.000100", "1800000002.000100")
    assert (click.action_id, click.value) == ("cairn_deny", "7")
    assert click.event_id == "click:UBOB:17.5"
    assert click_key(payload) == "slack:click:T0001:UBOB:17.5"


def test_a_request_outside_a_thread_is_its_own_thread() -> None:
    top = {"ts": "1800000002.000100", "channel": "C0OPS"}
    assert read_click(block_actions_payload(top, "cairn_approve", "7")).thread == top["ts"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"value": "7 or 1=1"}, "does not name a request"),
        ({"value": "٣"}, "does not name a request"),  # a digit, but not an ASCII one
        ({"action_id": "cairn_launch"}, "no button 'cairn_launch'"),
        ({"action_ts": ""}, "no time of its own"),
    ],
)
def test_a_click_that_does_not_name_a_request_is_refused(change: dict[str, str], said: str) -> None:
    payload = block_actions_payload(REQUEST, "cairn_approve", "7")
    payload["actions"][0].update(change)
    with pytest.raises(BadClick, match=said):
        read_click(payload)


def test_a_click_that_does_not_say_where_is_refused() -> None:
    payload = block_actions_payload(REQUEST, "cairn_approve", "7")
    for part in ("channel", "container", "message"):
        payload.pop(part)
    with pytest.raises(BadClick, match="who clicked which message where"):
        read_click(payload)
