"""/metrics of a worker with a forking pool: what its child processes count is served, summed
over every process, through prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_console_chat import _env
from tests.e2e.test_faults import CAIRN, _free_port
from tests.e2e.test_faults import workers_for as workers_for  # the fixture


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.slow
def test_a_forking_workers_metrics_include_what_its_children_counted(
    tmp_path: Path, redis_url: str, workers_for: Any
) -> None:
    folder = tmp_path / "prometheus"
    folder.mkdir()
    port = _free_port()
    env = _env(
        tmp_path / "home",
        CAIRN_BROKER_URL=redis_url,
        CAIRN_METRICS_PORT=str(port),
        PROMETHEUS_MULTIPROC_DIR=str(folder),
    )
    workers = workers_for(env)
    workers.start("--pool", "prefork")  # tasks run in a forked child, not in the served process
    chat_env = {k: v for k, v in env.items() if k != "CAIRN_METRICS_PORT"}
    talk = subprocess.run(
        [*CAIRN, "chat", "--json"],
        input="remember the staging database is pg-staging-2\n",
        capture_output=True,
        text=True,
        env=chat_env,
        timeout=120,
        check=True,
    )
    assert '"type": "reply"' in talk.stdout

    turns = ("cairn_task_duration_seconds_count", (("kind", "message"),))
    events = (
        "cairn_events_total",
        (("admission", "queued"), ("platform", "console"), ("type", "message")),
    )
    deadline = time.monotonic() + 30
    samples = _scrape(port)
    while samples.get(turns, 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.5)
        samples = _scrape(port)
    assert samples.get(turns) == 1  # counted in the pool child
    assert samples.get(events) == 1  # counted by the `cairn chat` frontend, another process
    assert any(p.name.endswith(".db") for p in folder.iterdir())
