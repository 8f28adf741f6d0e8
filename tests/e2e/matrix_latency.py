"""How long a person waits for the bot in an encrypted room, beside a clear one: a benchmark.

Run ``python -m tests.e2e.matrix_latency [--messages 20] [--json]``. It starts a Synapse on
127.0.0.1 (tests/support/synapse.py), runs Cairn's Matrix frontend in this process on the
embedded default with the offline model (a CAIRN_HOME in a temporary folder), and has one person
with an encrypting client of their own (tests/support/matrix_e2e.py) mention the bot in an
encrypted room and in a clear room, alternately, one mention at a time. Each figure is from the
moment the person's client sends the mention to the moment it holds the bot's reply, decrypted
where the room is encrypted: what the person waits, both encryptions and the homeserver's
round trips included. Prints p50/p95 in milliseconds for each room.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cairn.bot.matrix import MatrixFrontend
from cairn.bot.pipeline import Pipeline
from cairn.core.settings import load_settings
from cairn.core.stats import percentiles
from tests.support.matrix_e2e import E2EPerson
from tests.support.synapse import Synapse, running_synapse

__all__ = ["measure"]

READY_SECONDS = 60.0
REPLY_SECONDS = 60.0


def measure(messages: int, *, progress: bool = False) -> dict[str, Any]:
    """Mention the bot ``messages`` times in each room; the latency figures, in ms."""
    with tempfile.TemporaryDirectory(prefix="cairn-matrix-latency-") as folder:
        root = Path(folder)
        with running_synapse() as synapse, _bot(synapse, root / "home") as bot_id:
            user = synapse.register(f"alice-{secrets.token_hex(3)}")
            with E2EPerson(synapse, user, root / "alice-store") as alice:
                rooms = {
                    "encrypted": alice.create_room(invite=(bot_id,), encrypted=True),
                    "clear": alice.create_room(invite=(bot_id,), encrypted=False),
                }
                for room in rooms.values():
                    alice.wait_joined(room, bot_id)
                waited: dict[str, list[float]] = {name: [] for name in rooms}
                encrypted_replies = 0
                for n in range(messages):
                    for name, room in rooms.items():
                        started = time.perf_counter()
                        root_id = alice.send(room, f"cairn: question {n}?", mention=bot_id)
                        reply = alice.wait_for(
                            lambda e, root_id=root_id: _answers(e, bot_id, root_id),
                            REPLY_SECONDS,
                            room=room,
                            what=f"the reply to question {n} in the {name} room",
                        )
                        waited[name].append((time.perf_counter() - started) * 1000)
                        encrypted_replies += bool(getattr(reply, "decrypted", False))
                    if progress:
                        print(f"{n + 1}/{messages} mentions in each room", file=sys.stderr)
    result: dict[str, Any] = {
        name: {"mention_to_reply_ms": percentiles(values, digits=1), "messages": len(values)}
        for name, values in waited.items()
    }
    result["encrypted_replies"] = encrypted_replies
    return result


def _answers(event: Any, bot_id: str, root_id: str) -> bool:
    if event.sender != bot_id or event.source.get("type") != "m.room.message":
        return False
    relation = (event.source.get("content") or {}).get("m.relates_to") or {}
    return bool(relation.get("event_id") == root_id)


@contextmanager
def _bot(synapse: Synapse, home: Path) -> Iterator[str]:
    """Cairn's Matrix frontend, encrypting, in a thread; yields the bot's user id."""
    account = synapse.register(f"cairn-{secrets.token_hex(3)}")
    saved = dict(os.environ)
    os.environ.update(
        {
            "CAIRN_HOME": str(home),
            "MATRIX_HOMESERVER": synapse.base_url,
            "MATRIX_USER_ID": account.user_id,
            "MATRIX_PASSWORD": account.password,
            "CAIRN_MATRIX_ENCRYPTION": "true",
        }
    )
    stop = threading.Event()
    try:
        settings = load_settings()
        pipeline = Pipeline.open(settings)
        frontend = MatrixFrontend(pipeline, settings)
        thread = threading.Thread(target=frontend.run, args=(stop,), daemon=True)
        thread.start()
        deadline = time.monotonic() + READY_SECONDS
        while not frontend.healthy():
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the Matrix frontend did not sync")
            time.sleep(0.1)
        try:
            yield account.user_id
        finally:
            stop.set()
            thread.join(60)
            pipeline.close()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    """The command line: figures as JSON, or as lines for people."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20, help="mentions per room (20)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.messages < 1:
        parser.error("--messages must be at least 1")
    result = measure(args.messages, progress=not args.json)
    if args.json:
        print(json.dumps(result))
        return
    for name in ("encrypted", "clear"):
        figures = result[name]["mention_to_reply_ms"]
        print(
            f"{name:>9} room: mention to reply p50 {figures['p50']:.1f} ms, "
            f"p95 {figures['p95']:.1f} ms over {result[name]['messages']} messages"
        )
    print(f"replies that arrived encrypted in the encrypted room: {result['encrypted_replies']}")


if __name__ == "__main__":
    main()
