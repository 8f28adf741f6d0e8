"""Requests to /slack/events that Slack could not have sent, from someone without the signing
secret or from a signer gone wrong: each is answered 401 (not signed by Slack) or 400 (signed but
unreadable) with one line in the log and no traceback, and the frontend goes on answering Slack.
The real Slack frontend serves them over HTTP, its Web API calls going to the local stand-in."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.parse
from http.client import HTTPConnection
from typing import Any

import pytest

from cairn.bot.slack.frontend import MAX_BODY_BYTES
from tests.support.slack_api import BOT_USER, event_payload, signed_headers
from tests.support.slack_harness import SIGNING_SECRET, Harness, running_slack

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
Case = tuple[str, bytes, dict[str, str]]


@pytest.fixture
def http(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO)
    with running_slack(monkeypatch) as harness:
        yield harness


def signed(body: bytes, content_type: str = JSON, **changes: str) -> dict[str, str]:
    headers = signed_headers(SIGNING_SECRET, body)
    headers["Content-Type"] = content_type
    headers.update(changes)
    return headers


def signed_json(payload: Any) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    return body, signed(body)


def signed_form(form: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    body = urllib.parse.urlencode(form).encode()
    return body, signed(body, FORM)


def interaction(payload: Any) -> tuple[bytes, dict[str, str]]:
    return signed_form({"payload": json.dumps(payload)})


def mention(text: Any = f"<@{BOT_USER}> what do you know about deploys?") -> dict[str, Any]:
    ts = f"{time.time():.6f}"
    return {
        "type": "app_mention",
        "user": "UANN",
        "text": text,
        "ts": ts,
        "channel": "C0CHAN",
        "event_ts": ts,
    }


def block_action(**changes: Any) -> dict[str, Any]:
    payload = {
        "type": "block_actions",
        "team": {"id": "T0001", "domain": "test"},
        "user": {"id": "UANN", "team_id": "T0001"},
        "api_app_id": "ACAIRN",
        "trigger_id": "1.2.3",
        "actions": [{"type": "button", "action_id": "cairn_confirm", "value": "1"}],
    }
    payload.update(changes)
    return payload


def assert_each_refused_in_one_line(
    h: Harness, caplog: pytest.LogCaptureFixture, cases: list[Case], status: int
) -> None:
    """Each case is answered ``status`` with one line in the log and no traceback; then a
    mention is still answered."""
    for name, body, headers in cases:
        caplog.clear()
        got, _, answer = h.exchange(body, headers)
        assert got == status, f"{name}: {got} {answer!r}"
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1, f"{name}: {lines}"
        assert "\n" not in lines[0], name
        assert not any(r.exc_info for r in caplog.records), name
        assert f": {status}, " in lines[0], f"{name}: {lines[0]}"
    assert_still_answers(h)  # and the frontend is none the worse for them


def assert_still_answers(h: Harness) -> None:
    before = len(h.api.posts())
    h.deliver(mention())
    h.settle()
    posts = h.api.posts()
    assert len(posts) == before + 1
    assert "deploys" in posts[-1]["text"]


def test_a_timestamp_that_is_not_a_number_is_401_whatever_the_body(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    garbage = b'{"type": "event_callback", "event": {'
    # What a signer with the right secret and a broken clock would send.
    base = b"v0:abc:" + garbage
    over_abc = "v0=" + hmac.new(SIGNING_SECRET.encode(), base, hashlib.sha256).hexdigest()
    cases: list[Case] = [
        (
            "without a signature",
            garbage,
            {"Content-Type": JSON, "X-Slack-Request-Timestamp": "abc"},
        ),
        (
            "with a forged signature",
            garbage,
            signed(garbage, **{"X-Slack-Request-Timestamp": "abc"}),
        ),
        (
            "signed over it",
            garbage,
            signed(garbage, **{"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": over_abc}),
        ),
        ("negative", garbage, signed(garbage, **{"X-Slack-Request-Timestamp": "-1"})),
        ("5000 digits", garbage, signed(garbage, **{"X-Slack-Request-Timestamp": "9" * 5000})),
    ]
    assert_each_refused_in_one_line(http, caplog, cases, 401)


def test_unsigned_forged_or_stale_requests_are_401_before_the_body_is_read(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    truncated = b'{"type": "event_callback", "event": {"type": "app_'
    stale = str(int(time.time()) - 600)
    stale_headers = signed_headers(SIGNING_SECRET, truncated, timestamp=int(stale))
    cases: list[Case] = [
        ("unsigned truncated JSON", truncated, {"Content-Type": JSON}),
        ("unsigned bytes that are not UTF-8", b"\xff\xfe{", {"Content-Type": JSON}),
        ("forged signature on an array", b"[]", signed(b"[]", **{"X-Slack-Signature": "v0=00"})),
        ("another secret", truncated, signed_headers("not-the-secret", truncated)),
        ("stale", truncated, stale_headers),
        ("no signature", truncated, {"Content-Type": JSON, "X-Slack-Request-Timestamp": stale}),
        ("unsigned form payload", b"payload=%7B", {"Content-Type": FORM}),
    ]
    assert_each_refused_in_one_line(http, caplog, cases, 401)


def test_signed_events_that_are_not_json_objects_are_400(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    truncated = json.dumps(event_payload(mention())).encode()[:-20]
    not_utf8 = b'{"type": "event_callback", "text": "\xff\xfe"}'
    cases: list[Case] = [
        ("truncated JSON", truncated, signed(truncated)),
        ("bytes that are not UTF-8", not_utf8, signed(not_utf8)),
        ("an empty body", b"", signed(b"")),
        ("a form body sent as JSON", b"a=b", signed(b"a=b")),
    ]
    for name, payload in [("an array", []), ("a number", 5), ("a string", "x"), ("null", None)]:
        cases.append((name, *signed_json(payload)))
    assert_each_refused_in_one_line(http, caplog, cases, 400)


def test_signed_events_whose_event_or_ids_are_the_wrong_shape_are_400(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    def payload(**changes: Any) -> dict[str, Any]:
        return {**event_payload(mention()), **changes}

    wrong = {
        "an event that is a string": payload(event="notadict"),
        "an event that is a number": payload(event=5),
        "an event that is null": payload(event=None),
        "an event that is an array": payload(event=["type"]),
        "an event without a type": payload(event={"user": "UANN"}),
        "an event whose type is a number": payload(event={"type": 5}),
        "no type at all": {"event_id": "Ev1", "team_id": "T0001"},
        "authorizations that are a number": payload(authorizations=5),
        "a team that is a number": payload(team=5),
        "an event user that is a number": payload(event={**mention(), "user": 5}),
    }
    cases = [(name, *signed_json(body)) for name, body in wrong.items()]
    assert_each_refused_in_one_line(http, caplog, cases, 400)


def test_signed_interactions_and_commands_that_are_malformed_are_400(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    payload_not_utf8 = b"payload=%7B%22type%22%3A%22\xff%22%7D"
    command = {"team_id": "T0001", "user_id": "UANN", "command": "/cairn", "text": "status"}
    cases: list[Case] = [
        ("truncated payload", *signed_form({"payload": '{"type": "block_'})),
        ("payload that is an array", *signed_form({"payload": "[]"})),
        ("payload bytes that are not UTF-8", payload_not_utf8, signed(payload_not_utf8, FORM)),
        ("actions that are a string", *interaction(block_action(actions="x"))),
        ("no actions", *interaction(block_action(actions=[]))),
        ("an action without an id", *interaction(block_action(actions=[{"value": "1"}]))),
        ("an action that is a number", *interaction(block_action(actions=[5]))),
        ("a user that is a string", *interaction(block_action(user="UANN"))),
        ("a team that is a number", *interaction(block_action(team=5))),
        ("a command with authorizations", *signed_form({**command, "authorizations": "x"})),
        ("a form that is neither", *signed_form({"hello": "world"})),
    ]
    assert_each_refused_in_one_line(http, caplog, cases, 400)


def test_events_with_wrong_typed_fields_are_acknowledged_and_skipped_without_a_traceback(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    reaction = {"type": "reaction_added", "user": "UANN", "reaction": "+1", "item": "x"}
    spoken = {**mention(), "type": "message", "subtype": ["bot_message"], "channel_type": "im"}
    caplog.clear()
    for event in (reaction, spoken, mention(text=5)):
        status, _ = http.post(event_payload(event))
        assert status == 200
    http.settle()
    assert not [r.getMessage() for r in caplog.records if r.exc_info], "a traceback was logged"
    assert_still_answers(http)


def test_slacks_unsigned_certificate_check_is_still_answered(http: Harness) -> None:
    body = b"ssl_check=1&token=legacy-verification-token"
    status, _ = http.post_raw(body, {"Content-Type": FORM})
    assert status == 200


def test_a_body_over_the_size_limit_is_413_before_it_is_sent(http: Harness) -> None:
    connection = HTTPConnection("127.0.0.1", http.frontend.http_port, timeout=10)
    try:
        connection.putrequest("POST", "/slack/events")
        connection.putheader("Content-Type", JSON)
        connection.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
        connection.endheaders()  # and not a byte of the body: the answer comes first
        assert connection.getresponse().status == 413
    finally:
        connection.close()
    assert_still_answers(http)


def test_the_endpoint_answers_while_the_process_holds_more_than_1024_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """select() cannot watch a descriptor numbered 1024 or more; a frontend whose process has
    that many open (MCP servers, sockets, stores) must still answer Slack."""
    import os

    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with running_slack(monkeypatch) as harness:
            body = json.dumps({"type": "url_verification", "challenge": "fd", "token": "t"})
            status, _, answer = harness.exchange(
                body.encode(), signed_headers(SIGNING_SECRET, body.encode())
            )
            assert status == 200
            assert json.loads(answer) == {"challenge": "fd"}
    finally:
        for fd in held:
            os.close(fd)
