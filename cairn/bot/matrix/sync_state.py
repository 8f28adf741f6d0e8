"""What the Matrix frontend keeps between runs, in ``CAIRN_HOME/matrix/state-<account>.json``.

The device id and access token (so a restart reuses the device instead of creating a new one
each time), the sync ``since`` token (so a restart neither replays history nor misses what came
while it was down), the rooms already told that encryption is off, and the encrypted events
still waiting for their keys. The file holds a
credential, so it is written owner-only, and atomically, so a crash leaves the old or the new
version, never half of one. One file per bot account, so that the frontends of agents with
Matrix users of their own may share a folder.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cairn.core.atomic import write_atomically
from cairn.core.errors import StorageError

__all__ = ["MatrixState", "StateFile"]


@dataclass
class MatrixState:
    """The Matrix session of one bot account on one homeserver."""

    homeserver: str
    user_id: str
    device_id: str = ""
    access_token: str = ""
    since: str = ""
    warned_rooms: list[str] = field(default_factory=list)
    # Encrypted events waiting for their keys (cairn.bot.matrix.undecrypted), by event id.
    undecrypted: dict[str, dict[str, Any]] = field(default_factory=dict)


class StateFile:
    """The state file of one bot account in ``folder``.

    Without ``user_id`` it is ``state.json``, the name from before there was one file per
    account; with it, ``state-<account>.json``, and ``state.json`` is still read when the
    account's own file does not exist yet (then the next save supersedes it).
    """

    def __init__(self, folder: Path, user_id: str = "") -> None:
        self.legacy = folder / "state.json"
        account = re.sub(r"[^A-Za-z0-9._=-]", "_", user_id.lstrip("@"))
        self.path = folder / f"state-{account}.json" if user_id else self.legacy

    def load(self, homeserver: str, user_id: str) -> MatrixState:
        """The saved state of ``user_id`` on ``homeserver``; a fresh one if none (or another's).

        Raises StorageError when a file exists but cannot be read.
        """
        for path in dict.fromkeys((self.path, self.legacy)):
            try:
                raw = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise StorageError(
                    f"cannot read the Matrix state file {path}: {exc}; delete it to log in afresh"
                ) from exc
            if isinstance(raw, dict) and (raw.get("homeserver"), raw.get("user_id")) == (
                homeserver,
                user_id,
            ):
                known = {k: v for k, v in raw.items() if k in MatrixState.__dataclass_fields__}
                return MatrixState(**known)
        return MatrixState(homeserver, user_id)  # none yet, or another account's: start afresh

    def save(self, state: MatrixState) -> None:
        """Write ``state`` atomically, readable by the owner only. Raises StorageError."""
        try:
            write_atomically(self.path, json.dumps(asdict(state), indent=1))
        except OSError as exc:
            raise StorageError(f"cannot write the Matrix state file {self.path}: {exc}") from exc
