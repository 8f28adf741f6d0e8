"""The checkpoint of ``cairn import matrix``: ids and tokens only, written whole, one per
choice of room and dates, and a clear error when it cannot be read (issue 34, ADR 0044)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cairn.bot.matrix.history import Checkpoint, checkpoint_path
from cairn.core.errors import StorageError


def test_a_checkpoint_reads_back_what_was_saved(tmp_path: Path) -> None:
    path = tmp_path / "imports" / "matrix-x.json"
    saved = Checkpoint(floor="$old", top="$new", resume="t47-12_0", edits={"$a": "$edit"})
    saved.save(path)
    assert Checkpoint.load(path) == saved
    assert not path.with_suffix(".partial").exists()


def test_no_checkpoint_is_a_fresh_start(tmp_path: Path) -> None:
    assert Checkpoint.load(tmp_path / "none.json") == Checkpoint()


def test_a_write_cut_short_leaves_the_checkpoint_before_it(tmp_path: Path) -> None:
    path = tmp_path / "matrix-x.json"
    Checkpoint(floor="$old").save(path)
    path.with_suffix(".partial").write_text('{"floor": "$new", "to')  # killed mid-write
    assert Checkpoint.load(path).floor == "$old"


def test_an_unreadable_checkpoint_is_refused_naming_it_and_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "matrix-x.json"
    path.write_text("not json")
    with pytest.raises(StorageError, match="cannot be read") as caught:
        Checkpoint.load(path)
    assert str(path) in str(caught.value)
    assert "delete it" in str(caught.value)


def test_each_room_tenant_and_choice_of_dates_has_a_checkpoint_of_its_own(tmp_path: Path) -> None:
    paths = {
        checkpoint_path(tmp_path, "matrix:a.org", "!r:a.org", None, None),
        checkpoint_path(tmp_path, "matrix:b.org", "!r:a.org", None, None),
        checkpoint_path(tmp_path, "matrix:a.org", "!s:a.org", None, None),
        checkpoint_path(tmp_path, "matrix:a.org", "!r:a.org", date(2025, 1, 1), None),
        checkpoint_path(tmp_path, "matrix:a.org", "!r:a.org", None, date(2025, 1, 1)),
    }
    assert len(paths) == 5
    assert all(p.parent == tmp_path / "imports" for p in paths)
    # The same choice again is the same checkpoint, wherever the command runs.
    again = checkpoint_path(tmp_path, "matrix:a.org", "!r:a.org", None, None)
    assert again in paths
