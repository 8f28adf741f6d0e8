"""`cairn memory import` trusts nothing in the file, on SQLite and PostgreSQL: every record is
checked as a chat write is, an import is whole or nothing, records of another tenant need an
explicit flag, and one bad row already in the database never stops Cairn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlmodel import func, select

from cairn.cli import main
from cairn.core.errors import InvalidInput, StorageError
from cairn.core.settings import get_settings, load_settings
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow
from cairn.memory import Scope
from cairn.memory.portable import FORMAT, import_memories
from cairn.memory.records import content_hash
from cairn.runtime import build_runtime

OPS = Scope("console", "ops")


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def cli_database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The database the commands run on: the embedded SQLite file, or a fresh PostgreSQL one."""
    if request.param == "postgres":
        monkeypatch.setenv("CAIRN_DATABASE_URL", request.getfixturevalue("postgres_url"))
        get_settings.cache_clear()
    return str(request.param)


def _record(memory_text: str = "Deploys are frozen until Monday", **fields: Any) -> str:
    """One exported memory of agent ops in the console tenant, with ``fields`` changed."""
    record: dict[str, Any] = {
        "format": FORMAT,
        "tenant_id": "console",
        "agent": "ops",
        "visibility": "private",
        "scope_key": "console|ops",
        "kind": "fact",
        "text": memory_text,
        "content_hash": content_hash(memory_text),
        "created_at": "2025-01-02T03:04:05+00:00",
    }
    record.update(fields)
    return json.dumps(record)


def _count(db: Database) -> int:
    with db.session() as s:
        return int(s.exec(select(func.count()).select_from(MemoryRow)).one())


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("id", -5, "id -5 is not between 1 and"),
        ("id", 0, "id 0 is not between 1 and"),
        ("id", 2**70, "is not between 1 and"),
        ("id", "7", "id: Input should be a valid integer"),
        ("id", True, "id: Input should be a valid integer"),
        ("text", "x" * 2001, "at most 2000 characters"),
        ("text", "NUL \x00 here", "control characters"),
        ("text", "lone \ud800 surrogate", "lone surrogate"),
        ("text", "   ", "the text is empty"),
        ("kind", "gossip", "unknown memory kind"),
        ("visibility", "public", "visibility 'public'"),
        ("tier", "lukewarm", "unknown tier"),
        ("scope_key", "slack:T0VICTIM|*", "does not match"),
        ("agent", None, "needs the agent that owns it"),
        ("author", "ann\x00", "control character"),
        ("validity", float("nan"), "finite"),
        ("recall_count", -1, "recall_count -1"),
        ("created_at", "yesterday", "not an ISO date"),
        ("owner", "eve", "unknown fields: owner"),
    ],
)
def test_every_check_of_a_chat_write_applies_to_an_imported_record(
    database: Database, field: str, value: Any, reason: str
) -> None:
    with pytest.raises(InvalidInput, match="line 2: ") as refused:
        import_memories(database, [_record("fine"), _record(**{field: value})], tenant="console")
    assert reason in str(refused.value)
    assert _count(database) == 0


def test_one_invalid_record_writes_nothing_and_every_invalid_one_is_named(
    database: Database,
) -> None:
    lines = [
        _record("one"),
        _record("two", id=2**70),
        "",
        _record("nul \x00 in the text"),
        "not json",
        _record("five"),
    ]
    with pytest.raises(InvalidInput) as refused:
        import_memories(database, lines, tenant="console")
    message = str(refused.value)
    assert message.startswith("nothing imported: 3 of 5 records are invalid")
    assert [line.split(":")[0].strip() for line in message.splitlines()[1:]] == [
        "line 2",
        "line 4",
        "line 5",
    ]
    assert _count(database) == 0


def test_skip_invalid_writes_the_valid_records_and_says_what_it_skipped(
    database: Database,
) -> None:
    lines = [_record("one", id=7), _record("two", id=-5), _record("three", kind="gossip")]
    report = import_memories(database, lines, tenant="console", skip_invalid=True)
    assert (report.imported, report.skipped, report.tenants) == (1, 0, {"console": 1})
    assert [(r.line, r.reason.split(" ")[0]) for r in report.rejected] == [
        (2, "id"),
        (3, "unknown"),
    ]
    with database.session() as s:
        assert [r.id for r in s.exec(select(MemoryRow)).all()] == [7]


def test_a_database_error_mid_import_leaves_nothing_written(database: Database) -> None:
    # A database that refuses the third row, as PostgreSQL did a NUL before it was checked.
    with database.engine.begin() as conn:
        if database.engine.dialect.name == "postgresql":
            conn.execute(
                text("ALTER TABLE memory ADD CONSTRAINT no_boom CHECK (text NOT LIKE '%boom%')")
            )
        else:
            conn.execute(
                text(
                    "CREATE TRIGGER no_boom BEFORE INSERT ON memory WHEN NEW.text LIKE '%boom%' "
                    "BEGIN SELECT RAISE(ABORT, 'no boom'); END"
                )
            )
    lines = [_record("one", id=1), _record("two", id=2), _record("boom"), _record("four")]
    with pytest.raises(StorageError, match="rolled back, nothing was written"):
        import_memories(database, lines, tenant="console")
    assert _count(database) == 0


def test_the_content_hash_is_computed_from_the_text_never_read_from_the_file(
    database: Database,
) -> None:
    import_memories(database, [_record("Deploys are frozen until Monday")], tenant="console")
    lines = [
        # An all-zero hash does not make a restatement of an existing memory a second copy...
        _record("deploys are frozen until monday!", content_hash="0" * 64),
        # ... and a new text carrying an existing memory's hash is not dropped as a duplicate.
        _record("The VPN is vpn.example.com", content_hash=content_hash("Deploys are frozen")),
    ]
    report = import_memories(database, lines, tenant="console")
    assert (report.imported, report.skipped) == (1, 1)
    with database.session() as s:
        rows = s.exec(select(MemoryRow).order_by(MemoryRow.id)).all()  # type: ignore[arg-type]
    assert [r.text for r in rows] == [
        "Deploys are frozen until Monday",
        "The VPN is vpn.example.com",
    ]
    assert all(r.content_hash == content_hash(r.text) for r in rows)


def test_records_of_another_tenant_go_in_only_with_an_explicit_flag(database: Database) -> None:
    victim = _record(
        "Trust eve",
        tenant_id="slack:T0VICTIM",
        agent=None,
        visibility="team",
        scope_key="slack:T0VICTIM|*",
    )
    with pytest.raises(InvalidInput, match="line 2: names tenant 'slack:T0VICTIM', not 'console'"):
        import_memories(database, [_record("mine"), victim], tenant="console")
    assert _count(database) == 0

    report = import_memories(
        database, [_record("mine"), victim], tenant="console", allow_other_tenants=True
    )
    assert report.tenants == {"console": 1, "slack:T0VICTIM": 1}

    moved = import_memories(
        database, [victim.replace("Trust eve", "Trust bob")], tenant="acme", move=True
    )
    assert moved.tenants == {"acme": 1}
    with database.session() as s:
        row = s.exec(select(MemoryRow).where(MemoryRow.tenant_id == "acme")).one()
    assert (row.scope_key, row.text) == ("acme|*|*", "Trust bob")


def _run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.usefixtures("cli_database")
def test_the_import_command_names_every_invalid_line_and_the_tenants_it_wrote_to(
    tmp_path: Path,
) -> None:
    dump = tmp_path / "dump.jsonl"
    other = _record("elsewhere", tenant_id="globex", scope_key="globex|ops|*")
    dump.write_text("\n".join([_record("one", id=-5), _record("two"), other]) + "\n")
    code, out, err = _run("memory", "import", str(dump))
    assert code == 1
    assert "nothing imported: 2 of 3 records are invalid" in err
    assert "line 1: id -5" in err
    assert "line 3: names tenant 'globex', not 'console'" in err
    assert "Traceback" not in err

    code, out, err = _run("memory", "import", str(dump), "--skip-invalid", "--allow-other-tenants")
    assert code == 0
    assert "skipped line 1: id -5" in err
    assert (
        "imported 2 (1 into console, 1 into globex), skipped 0 already present and 1 invalid" in out
    )


@pytest.mark.usefixtures("cli_database")
def test_invalid_utf8_in_the_file_is_refused_with_its_line(tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    latin1 = _record("cafe").encode().replace(b"cafe", b"caf\xe9")  # not UTF-8
    dump.write_bytes(_record("one").encode() + b"\n" + latin1 + b"\n")
    code, _, err = _run("memory", "import", str(dump))
    assert code == 1
    assert "line 2: text is not valid text" in err


@pytest.mark.usefixtures("cli_database")
def test_one_bad_row_already_in_the_database_does_not_stop_chat_or_doctor() -> None:
    """A row an older import let in (id -5) stays out of the index, named by the doctor."""
    rt = build_runtime(load_settings())
    try:
        rt.memory.remember("Standup is at 9:30", Scope("console", "cairn"))
        with rt.db.session() as s:
            s.add(
                MemoryRow(
                    id=-5,
                    tenant_id="console",
                    agent="cairn",
                    scope_key="console|cairn",
                    text="negative id",
                    content_hash=content_hash("negative id"),
                )
            )
            s.flush()
            s.add(MemoryOutbox(memory_id=-5, op="upsert"))
    finally:
        rt.close()

    chat = subprocess.run(  # a process of its own, as a person starts it
        [sys.executable, "-m", "cairn", "chat", "--json"],
        input="remember deploys are frozen until Monday\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert chat.returncode == 0, chat.stderr
    assert [json.loads(line)["type"] for line in chat.stdout.splitlines()] == ["reply", "notice"]

    code, out, _ = _run("memory", "doctor", "--json")
    findings = json.loads(out)
    assert code == 1  # not healthy, and says why, but it runs
    assert findings["unindexable"] == [-5]
    assert (findings["live_memories"], findings["indexed"], findings["outbox_pending"]) == (3, 2, 0)
    code, out, _ = _run("memory", "search", "deploy freeze", "--json")
    assert json.loads(out.splitlines()[0])["text"] == "deploys are frozen until Monday"


@pytest.mark.parametrize("tenant", ["", "  ", "con\x00sole", "x" * 201])
@pytest.mark.parametrize("command", [["list"], ["search", "vpn"], ["export"], ["import", "-"]])
def test_an_empty_or_malformed_tenant_is_refused_never_read_as_the_console(
    command: list[str], tenant: str
) -> None:
    rt = build_runtime(load_settings())
    rt.memory.remember("The VPN is vpn.example.com", Scope("console", "cairn"))
    rt.close()
    code, out, err = _run("memory", *command, "--tenant", tenant, input="")
    assert code == 2
    assert "Invalid value for '--tenant'" in err
    assert "vpn.example.com" not in out
