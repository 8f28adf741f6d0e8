"""The frontends' publisher writes on Redis exactly what Celery's apply_async would."""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any

import pytest
import redis
from celery import Celery

from cairn.core.errors import QueueError
from cairn.workers.broker import QueuePublisher
from cairn.workers.dispatch import CeleryDispatcher


def _shape(value: Any) -> Any:
    """Keys all the way down, with the type of each leaf: what a consumer relies on."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    return type(value).__name__


def test_a_published_task_has_the_envelope_apply_async_writes(redis_url: str) -> None:
    app = Celery("publisher-test", broker=redis_url, set_as_current=False)
    app.conf.update(task_default_queue="cairn-test", task_ignore_result=True)
    app.conf.task_serializer = "json"

    @app.task(name="cairn.test_task")  # type: ignore[untyped-decorator]
    def task(n: int) -> int:
        return n

    task.apply_async(args=(7,))
    publisher = QueuePublisher(app, redis_url, "cairn-test")
    task_id = publisher.publish("cairn.test_task", (7,))
    publisher.close()

    client = redis.Redis.from_url(redis_url)
    ours, celerys = (json.loads(raw) for raw in client.lrange("cairn-test", 0, -1))
    assert _shape(ours) == _shape(celerys)
    # The same body (arguments, keyword arguments, callbacks) and routing; ids of its own.
    assert base64.b64decode(ours["body"]) == base64.b64decode(celerys["body"])
    assert ours["properties"]["delivery_info"] == celerys["properties"]["delivery_info"]
    assert ours["headers"]["task"] == celerys["headers"]["task"] == "cairn.test_task"
    assert ours["headers"]["id"] == ours["properties"]["correlation_id"] == task_id
    assert ours["headers"]["argsrepr"] == celerys["headers"]["argsrepr"] == "(7,)"
    assert ours["properties"]["delivery_tag"] != celerys["properties"]["delivery_tag"]


def test_an_unreachable_broker_is_named_after_the_retries() -> None:
    dispatcher = CeleryDispatcher("redis://127.0.0.1:9/0")
    with pytest.raises(QueueError, match=r"127\.0\.0\.1:9/0 \(CAIRN_BROKER_URL\)"):
        dispatcher.submit(1)
    dispatcher.close()


def test_a_broker_other_than_redis_is_refused_when_the_dispatcher_is_made() -> None:
    with pytest.raises(ValueError, match="redis:// or rediss://"):
        CeleryDispatcher("amqp://guest@127.0.0.1//")


def test_a_broker_that_never_answers_fails_the_publish_instead_of_hanging() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does) and never replies
    port = silent.getsockname()[1]
    app = Celery("publisher-test", set_as_current=False)
    publisher = QueuePublisher(app, f"redis://127.0.0.1:{port}/0", "cairn-test", timeout=0.2)
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        publisher.publish("cairn.test_task", (1,))
    # Four tries of 0.2 s and the pauses between them (2.1 s), not a hang.
    assert time.monotonic() - started < 6
    publisher.close()
    silent.close()
