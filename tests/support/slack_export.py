"""The Slack export writer the tests use: :mod:`cairn.bench.slack_export`, shared with
``cairn bench slack-import`` (one writer of realistic exports), and :func:`add_edits`, which adds
a later day of edits to one."""

import json
import zipfile
from pathlib import Path
from typing import Any

from cairn.bench.slack_export import *  # noqa: F403
from cairn.bench.slack_export import DECISION, SECRET
from cairn.bench.slack_export import __all__ as _written

__all__ = [*_written, "EDITED", "EDIT_DAY", "add_edits"]

# A later day of #general than write_export's, holding edits of messages posted before it.
EDIT_DAY = "general/2026-01-09.json"
EDITED = f"We decided to move the payments database to Postgres 17 on Monday, token {SECRET}"


def add_edits(path: Path) -> dict[str, Any]:
    """Add EDIT_DAY to the export at ``path``, with Slack's ``message_changed`` events: Bob
    edits the decision to EDITED, Alice "edits" a message of Bob's, and someone edits a message
    the export does not hold. Returns the decision as the export first had it."""
    with zipfile.ZipFile(path) as z:
        decision: dict[str, Any] = next(
            m
            for name in z.namelist()
            if name.startswith("general/")
            for m in json.loads(z.read(name))
            if m.get("text") == DECISION
        )
        other = next(
            m
            for name in z.namelist()
            if name.startswith("general/")
            for m in json.loads(z.read(name))
            if m.get("user") == "U02BOB" and m.get("text") != DECISION and not m.get("subtype")
        )

    def changed(message: dict[str, Any], text: str, user: str, at: str) -> dict[str, Any]:
        edited = {**message, "text": text, "user": user, "edited": {"user": user, "ts": at}}
        return {
            "type": "message",
            "subtype": "message_changed",
            "hidden": True,
            "message": edited,
            "previous_message": message,
            "channel": "C00000000",
            "event_ts": at,
            "ts": at,
        }

    unknown: dict[str, Any] = {
        "type": "message",
        "user": "U01ALICE",
        "text": "never exported",
        "ts": "17.000001",
    }
    events = [
        changed(decision, EDITED, "U02BOB", "1767949200.000100"),
        changed(other, "alice rewrote bob's words", "U01ALICE", "1767949201.000100"),
        changed(unknown, "an edit of a message not in the export", "U01ALICE", "1767949202.0001"),
    ]
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(EDIT_DAY, json.dumps(events, indent=4))
    return decision
