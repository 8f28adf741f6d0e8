"""Per-message stage timings (cairn.core.stages), as `cairn bench pipeline` reads them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cairn.core import stages


def test_spans_are_summed_per_message_and_read_back_once(tmp_path: Path) -> None:
    stages.record_to(tmp_path)
    try:
        with stages.message("worker"):
            with stages.span("recall"):
                time.sleep(0.01)
            with stages.span("recall"):  # entered twice: summed
                time.sleep(0.01)
            stages.note("queued", 5.0)
        with stages.span("recall"):  # outside a message: not counted anywhere
            time.sleep(0.01)
        seen: dict[str, int] = {}
        lines = stages.read(tmp_path, skip=seen)
        assert len(lines) == 1
        assert lines[0]["where"] == "worker"
        assert 20 <= float(lines[0]["recall"]) < float(lines[0]["total"])
        assert lines[0]["queued"] == 5.0
        assert stages.read(tmp_path, skip=seen) == []  # read already

        def frontend() -> None:
            with stages.message("frontend"), stages.span("gate"):
                pass

        thread = threading.Thread(target=frontend)
        thread.start()
        thread.join()
        summary = stages.summary(stages.read(tmp_path))
        assert set(summary) == {"frontend", "worker"}
        assert summary["worker"]["recall"]["messages"] == 1
        assert summary["frontend"]["gate"]["messages"] == 1
    finally:
        stages.record_to(None)


def test_off_nothing_is_written(tmp_path: Path) -> None:
    stages.record_to(None)
    with stages.message("worker"), stages.span("recall"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_paused_no_message_is_timed_until_resumed(tmp_path: Path) -> None:
    stages.record_to(tmp_path)
    try:
        stages.pause(tmp_path, True)
        with stages.message("worker"):
            assert stages.span("recall") is stages.span("model")  # the shared no-op
            with stages.span("recall"):
                pass
        assert stages.read(tmp_path) == []
        stages.pause(tmp_path, False)
        with stages.message("worker"), stages.span("recall"):
            pass
        assert [line["where"] for line in stages.read(tmp_path)] == ["worker"]
    finally:
        stages.record_to(None)
