"""`cairn bench pipeline`: both modes run end to end and report the figures the issue names."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlmodel import Session, create_engine, select

from cairn.bench.pipeline import run_mode
from cairn.db.models import EventKind, MemoryRow, SessionEvent
from tests.e2e.test_faults import CAIRN


@pytest.mark.slow
def test_the_pipeline_bench_reports_both_modes_with_nothing_lost(redis_url: str) -> None:
    done = subprocess.run(
        [
            *CAIRN,
            "bench",
            "pipeline",
            "--threads",
            "6",
            "--messages",
            "3",
            "--workers",
            "1",
            "--senders",
            "2",
            "--rate",
            "20",
            "--unique",
            "--redis-url",
            redis_url,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    results = json.loads(done.stdout)
    assert set(results) == {"redis", "inprocess"}
    for figures in results.values():
        assert figures["messages"] == 18
        assert figures["order_violations"] == 0
        assert figures["lost"] == 0
        assert figures["duplicated"] == 0
        assert figures["latency_at_per_s"] == 20
        # The latency run is paced at 20 messages/s by two senders at 10/s each: each
        # sender's 9th message leaves 8/10 = 0.8 s after its first, so 18 replies span at
        # least 0.8 s (22.5/s; a little slack for when the first row is stamped). The flood
        # before it is not paced: on this machine it gives 50-60/s.
        assert 0 < figures["sustained_per_s"] <= 24
        assert figures["messages_per_s"] > 0
        assert set(figures["latency_ms"]) == {"p50", "p95", "p99"}


@pytest.mark.parametrize("unique", [False, True])
def test_texts_repeat_unless_unique_asks_for_the_embedding_model(
    tmp_path: Path, unique: bool
) -> None:
    # In-process (no broker): 3 threads x 2 messages, flooded then paced.
    figures = run_mode(
        threads=3,
        messages=2,
        workers=1,
        broker_url=None,
        home=tmp_path,
        rate=50,
        unique=unique,
    )
    assert figures.lost == 0
    assert figures.duplicated == 0
    engine = create_engine(f"sqlite:///{tmp_path / 'cairn.db'}")
    with Session(engine) as s:
        texts = s.exec(
            select(SessionEvent.text).where(SessionEvent.kind == EventKind.MESSAGE)
        ).all()
    engine.dispose()
    assert len(texts) == 12  # two runs
    if unique:
        assert len(set(texts)) == 12
        assert all("deploy" in text and not text.endswith("?") for text in texts)
    else:
        assert sorted(set(texts)) == ["hello 0", "hello 1"]


def test_a_full_turn_on_a_seeded_home_writes_and_recalls_memories(tmp_path: Path) -> None:
    # In-process: 2 threads x 3 messages (a fact, a question about it, a statement), flooded
    # then paced, on a home seeded with 40 memories in each run's tenant.
    figures = run_mode(
        threads=2,
        messages=3,
        workers=1,
        broker_url=None,
        home=tmp_path,
        rate=50,
        turn="full",
        memories=40,
    )
    assert (figures.lost, figures.duplicated, figures.order_violations) == (0, 0, 0)
    assert (figures.turn, figures.memories) == ("full", 40)
    assert figures.peak_rss_mb > 50
    worker = figures.stages_ms["worker"]
    assert {"recall", "model", "tools", "outbox"} <= set(worker)  # the question's tool call
    engine = create_engine(f"sqlite:///{tmp_path / 'cairn.db'}")
    with Session(engine) as s:
        rows = s.exec(select(MemoryRow.tenant_id, MemoryRow.kind, MemoryRow.text)).all()
    engine.dispose()
    for tenant in ("flood", "paced"):
        seeded = [
            r for r in rows if r[0] == tenant and r[2].endswith(tuple(f"#{n}" for n in range(40)))
        ]
        assert len(seeded) == 40
        facts = [r for r in rows if r[0] == tenant and "deploys from runner" in r[2]]
        assert len(facts) == 2  # one "remember that ..." per thread


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line
            )
        except OSError:
            continue  # gone meanwhile
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_killed_pipeline_bench_stops_its_workers(redis_url: str) -> None:
    # Left running, a killed bench's workers would take the next run's tasks from the broker.
    bench = subprocess.Popen(
        [
            *CAIRN,
            "bench",
            "pipeline",
            "--threads",
            "50",
            "--messages",
            "200",
            "--redis-url",
            redis_url,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while len(workers) < 2:
            assert time.monotonic() < deadline, "the bench never started its workers"
            assert bench.poll() is None, "the bench ended before it was killed"
            time.sleep(0.2)
            workers = _children(bench.pid)
        time.sleep(1.0)  # into the run
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) == 128 + signal.SIGTERM
        time.sleep(0.5)
        assert [pid for pid in workers if _alive(pid)] == []
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
