"""`cairn import matrix` beside a running frontend: the request folder both sides share
(:mod:`cairn.bot.matrix.handover`), and the command's side of it (issue 34)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from dataclasses import asdict
from datetime import date
from pathlib import Path

import pytest

from cairn.bot.imported import ChannelTally, ImportReport
from cairn.bot.matrix import history
from cairn.bot.matrix.handover import STALE_SECONDS, Desk, Status
from cairn.bot.matrix.history import RoomHistoryError, import_room
from cairn.bot.matrix.store import AccountHeld, AccountLock, CryptoStore
from cairn.core.settings import Settings, load_settings
from cairn.runtime import Runtime

USER = "@cairn:example.org"


@pytest.fixture
def store(tmp_path: Path) -> CryptoStore:
    return CryptoStore(tmp_path / "store", USER)


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, runtime: Runtime) -> Settings:
    """The runtime's home with a bot account whose homeserver answers nothing."""
    monkeypatch.setenv("MATRIX_HOMESERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("MATRIX_USER_ID", USER)
    monkeypatch.setenv("MATRIX_PASSWORD", "secret")
    monkeypatch.setattr(history, "POLL_SECONDS", 0.02)
    return load_settings()


def bot_store(settings: Settings) -> CryptoStore:
    return CryptoStore(settings.matrix.store_dir(settings.home_dir), USER)


def test_a_request_is_taken_once_and_its_status_read_back(store: CryptoStore) -> None:
    desk = Desk(store)
    first = desk.ask("#ops:example.org", date(2025, 1, 1), date(2025, 2, 1), full=True)
    second = desk.ask("!other:example.org", None, None, full=False)
    assert desk.waiting(first)
    taken = desk.take()
    assert taken is not None
    assert (taken.id, taken.room, taken.since, taken.until, taken.full) == (
        first,
        "#ops:example.org",
        date(2025, 1, 1),
        date(2025, 2, 1),
        True,
    )
    assert not desk.waiting(first)
    assert not desk.withdraw(first)  # taken: too late to take it back
    assert desk.withdraw(second)  # not taken: withdrawn, and no frontend sees it
    assert desk.take() is None

    assert desk.status(first) is None  # nothing said of it yet
    desk.tell(first, Status("running", 200))
    assert desk.status(first) == Status("running", 200)
    desk.tell(first, Status("done", 400, report={"tenant": "matrix:example.org"}))
    desk.done(first)
    status = desk.status(first)
    assert status is not None
    assert status.over
    assert status.report == {"tenant": "matrix:example.org"}
    desk.forget(first)
    assert sorted(p.name for p in desk.folder.iterdir()) == []


def test_a_request_that_cannot_be_read_is_answered_with_the_reason(store: CryptoStore) -> None:
    desk = Desk(store)
    desk.folder.mkdir(parents=True)
    (desk.folder / "garbled.request").write_text("{not json")
    (desk.folder / "roomless.request").write_text('{"since": "2025-01-01"}')
    assert desk.take() is None
    for name in ("garbled", "roomless"):
        status = desk.status(name)
        assert status is not None
        assert status.state == "failed"
        assert status.error.startswith("the request cannot be read")
        assert not (desk.folder / f"{name}.taken").exists()


def test_only_the_holder_of_the_device_is_the_server(store: CryptoStore) -> None:
    desk = Desk(store)
    with AccountLock(store):
        assert desk.server() is None  # holds the device, takes no requests (another import)
        desk.open()
        assert desk.server() == os.getpid()
    # Let go without closing, as a killed frontend does: its file names nobody now.
    assert desk.server() is None
    with AccountLock(store):
        desk.open()
        desk.close()
        assert desk.server() is None


def test_a_new_frontend_clears_what_the_one_before_left(store: CryptoStore) -> None:
    desk = Desk(store)
    fresh = desk.ask("!a:example.org", None, None, full=False)
    orphan = desk.ask("!b:example.org", None, None, full=False)
    assert desk.take() is not None  # taken by a frontend that then died
    desk.tell(fresh, Status("done"))
    desk.tell(orphan, Status("done"))
    old = time.time() - STALE_SECONDS - 60
    os.utime(desk.folder / f"{orphan}.status", (old, old))
    desk.open()
    left = sorted(p.name for p in desk.folder.iterdir())
    assert left == sorted([f"{fresh}.status", f"{orphan}.request", "serving"])


def _report() -> ImportReport:
    tally = ChannelTally("Ops room", "room", False, read=3, stored=2, skipped={"join": 1})
    return ImportReport("matrix:example.org", {"!ops:example.org": tally}, 1, 0, unit="pages")


def _frontend(
    store: CryptoStore,
    serve: bool,
    answer: Status | None,
    ready: threading.Event,
    let_go: threading.Event,
) -> None:
    """A running frontend in a thread: holds the device, takes the first request and answers
    ``answer`` (or nothing), then lets the device go when ``let_go`` is set."""
    desk = Desk(store)
    with AccountLock(store):
        if serve:
            desk.open()
        ready.set()
        while answer is not None:
            request = desk.take()
            if request is not None:
                desk.tell(request.id, Status("running", 200))
                desk.tell(request.id, answer)
                desk.done(request.id)
                break
            time.sleep(0.01)
        let_go.wait(30)


def _run_beside(
    settings: Settings,
    runtime: Runtime,
    serve: bool,
    answer: Status | None,
    let_go_after: float = 30.0,
    seen: list[int] | None = None,
) -> ImportReport:
    """``import_room`` while a frontend thread (:func:`_frontend`) holds the device; ``seen``
    collects the progress the command showed."""
    ready, let_go = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_frontend, args=(bot_store(settings), serve, answer, ready, let_go)
    )
    holder.start()
    assert ready.wait(10)
    timer = threading.Timer(let_go_after, let_go.set)
    timer.start()
    seen = [] if seen is None else seen
    try:
        return asyncio.run(
            import_room(
                settings,
                runtime.memory,
                "!ops:example.org",
                progress=lambda done, total: seen.append(done),
            )
        )
    finally:
        let_go.set()
        timer.cancel()
        holder.join(10)


def test_an_import_beside_a_running_frontend_is_read_by_it_and_its_tally_shown(
    settings: Settings, runtime: Runtime
) -> None:
    seen: list[int] = []
    done = Status("done", 200, report=asdict(_report()))
    report = _run_beside(settings, runtime, True, done, seen=seen)
    assert report == _report()
    assert set(seen) == {200}  # the frontend's progress, shown by the command
    assert sorted(Desk(bot_store(settings)).folder.iterdir()) == [
        Desk(bot_store(settings)).folder / "serving"
    ]  # the request's files are gone


def test_the_frontends_failure_is_the_commands(settings: Settings, runtime: Runtime) -> None:
    failed = Status("failed", error="the homeserver would not show !ops:example.org")
    with pytest.raises(RoomHistoryError, match=r"running frontend \(process \d+\): the home"):
        _run_beside(settings, runtime, True, failed)


def test_a_device_held_by_a_process_that_takes_no_requests_is_refused_with_its_pid(
    settings: Settings, runtime: Runtime
) -> None:
    with pytest.raises(AccountHeld, match=rf"process {os.getpid()}"):
        _run_beside(settings, runtime, False, None)
    assert not list(Desk(bot_store(settings)).folder.glob("*.request"))


def test_a_request_nobody_takes_is_withdrawn_with_the_reason(
    settings: Settings, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "TAKE_SECONDS", 0.3)
    with pytest.raises(RoomHistoryError, match=r"did not take the import within 0\.3s"):
        _run_beside(settings, runtime, True, None)
    assert not list(Desk(bot_store(settings)).folder.glob("*.request"))


@pytest.mark.parametrize("answer", [None, Status("stopped"), Status("running", 200)])
def test_a_frontend_that_goes_away_part_way_leaves_the_import_to_the_command(
    settings: Settings,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    answer: Status | None,
) -> None:
    # It never took the request, stopped part-way, or was killed while reading: the command
    # takes the device over and reads the room itself (here, from a homeserver that is away).
    monkeypatch.setattr(history, "LOGIN_SECONDS", 0.5)
    with pytest.raises(RoomHistoryError, match=re.escape("could not log in to http://127.0.0.1:9")):
        _run_beside(settings, runtime, True, answer, let_go_after=0.5)
    assert bot_store(settings).holder() is None  # and let it go again
