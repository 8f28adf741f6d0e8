"""Two replicas of one Matrix bot account post each reply once, through claims in real Redis.

Two Matrix frontends run for the same bot account, each logged in with the password from a
CAIRN_HOME of its own, so each has its own device and access token: the homeserver's
transaction-id idempotency cannot drop the second replica's send. They share the pipeline (the
database the outbox lives in) and Redis, as pods of one deployment do, against a real Synapse.
Each replica's outbox read is held until the other replica has read the same rows, so both
always see a reply pending before either posts it; only the claim in Redis keeps it to one post.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from cairn.bot.matrix import MatrixFrontend
from cairn.bot.pipeline import Pipeline
from cairn.core.settings import load_settings
from cairn.db.models import OutboundMessage
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is the module-scoped homeserver fixture
    FACT,
    Person,
    answers_to,
    joined,
    synapse,
    wait_for,
)
from tests.support.synapse import Synapse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# How long a replica's outbox read waits for the other replica to read the same rows.
LOCKSTEP_SECONDS = 10.0


class Lockstep:
    """Holds each replica's outbox read until every replica has read the same pending rows.

    Without it the race is a matter of luck (a replica usually marks a row sent before the
    other's next poll); with it, both replicas hold every new reply before either posts it.
    """

    def __init__(self, replicas: int) -> None:
        self._replicas = replicas
        self._readers: defaultdict[int, set[str]] = defaultdict(set)
        self._changed = threading.Condition()

    def wrap(
        self, name: str, pending: Callable[..., list[OutboundMessage]]
    ) -> Callable[..., list[OutboundMessage]]:
        """``pending`` (an Outbox's read), returning only once the other replicas read its rows."""

        def read(**query: object) -> list[OutboundMessage]:
            rows = pending(**query)
            ids = [row.id for row in rows if row.id is not None]
            with self._changed:
                for row_id in ids:
                    self._readers[row_id].add(name)
                self._changed.notify_all()
                self._changed.wait_for(
                    lambda: all(len(self._readers[i]) >= self._replicas for i in ids),
                    timeout=LOCKSTEP_SECONDS,
                )
            return rows

        return read


class Replica:
    """One bot process: the Matrix frontend on a thread with a stop event, as `cairn run` has."""

    def __init__(self, frontend: MatrixFrontend) -> None:
        self.frontend = frontend
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="matrix-replica", daemon=True)

    def start(self) -> None:
        self._thread.start()
        wait_for("the replica's first sync", self.frontend.healthy)

    def _run(self) -> None:
        try:
            self.frontend.run(self._stop)
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the Matrix frontend did not stop"
        assert not self.errors, self.errors


def test_two_replicas_of_one_bot_account_post_a_reply_once(
    synapse: Synapse,  # noqa: F811
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bot = synapse.register(f"cairn-{secrets.token_hex(3)}")
    alice = Person(synapse, synapse.register(f"alice-{secrets.token_hex(3)}"))
    monkeypatch.setenv("MATRIX_HOMESERVER", synapse.base_url)
    monkeypatch.setenv("MATRIX_USER_ID", bot.user_id)
    monkeypatch.setenv("MATRIX_PASSWORD", bot.password)
    monkeypatch.setenv("CAIRN_REDIS_URL", redis_url)
    monkeypatch.setenv("CAIRN_REPLY_TIMEOUT", "60")
    settings = load_settings()
    pipeline = Pipeline.open(settings)
    lockstep = Lockstep(replicas=2)
    replicas: list[Replica] = []
    try:
        for name in ("a", "b"):
            # A CAIRN_HOME each: each replica keeps its own Matrix device and token.
            home = settings.home_dir if name == "a" else tmp_path / f"replica-{name}"
            frontend = MatrixFrontend(pipeline, load_settings(CAIRN_HOME=str(home)))
            monkeypatch.setattr(
                frontend.outbox, "pending", lockstep.wrap(name, frontend.outbox.pending)
            )
            replica = Replica(frontend)
            replicas.append(replica)
            replica.start()
        devices = {r.frontend.state.device_id for r in replicas}
        assert len(devices) == 2, f"the replicas share a device: {devices}"

        room = alice.create_room(invite=(bot.user_id,))
        wait_for("the bot to join", lambda: joined(alice, room, bot.user_id))
        mention = alice.send(room, f"cairn: remember {FACT}", mention=bot.user_id)
        wait_for(
            "the reply and the remembered notice",
            lambda: len(answers_to(alice, room, bot.user_id, mention)) >= 2,
        )
        time.sleep(2.0)  # several delivery rounds of both replicas: room for a second post

        answers = answers_to(alice, room, bot.user_id, mention)
        assert [e["content"]["msgtype"] for e in answers] == ["m.text", "m.notice"], [
            (e["content"]["msgtype"], e["content"]["body"][:60]) for e in answers
        ]
        assert answers[1]["content"]["body"] == f"remembered: {FACT}"
        # The posts were claimed in the shared Redis, under the bot account's own keys.
        claims = redis.Redis.from_url(redis_url).keys("cairn:dedupe:matrix:outbox:*")
        assert claims
        assert all(bot.user_id.encode() in key for key in claims), claims
    finally:
        for replica in replicas:
            replica.stop()
        pipeline.close()
