"""Erasure on request (issue 34, docs/adr/0043): a person's words, written through every path
Cairn has, are gone from every table, every index point and every byte under CAIRN_HOME after
`cairn memory erase --person`, on SQLite and on PostgreSQL; other people's memories stay and
`cairn memory doctor` is healthy."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select as sa_select
from sqlmodel import SQLModel, select

import cairn.db.models  # noqa: F401  (every table on SQLModel.metadata)
from cairn.bench.scratch import handled
from cairn.bot.pipeline import Pipeline
from cairn.bot.spool import Spool, spool_folder
from cairn.cli import main
from cairn.core.settings import Settings, get_settings, load_settings
from cairn.db.models import Erasure, MemoryRow, OutboundMessage
from cairn.llm.types import LLMResponse, TextBlock, ToolUseBlock
from cairn.memory import Scope
from cairn.memory.portable import export_memories
from cairn.memory.scope import Source
from cairn.memos.box import MemoBox
from cairn.runtime import Runtime, build_runtime, reset_runtime
from cairn.sessions.events import Attachment, ChatEvent, EventType
from cairn.workers.dispatch import InProcessDispatcher
from cairn.workers.session_end import end_session
from tests.support.scripted_llm import ScriptedLLM

TENANT, CHANNEL = "acme", "C1"
# One made-up word per path, so that a word found afterwards names the path that kept it.
WORDS = {
    "chat": "blorvington",
    "tool": "quistaphel",
    "paste": "zantarrow",
    "learning": "mivvelcrest",
    "memo": "drobnakle",
    "import": "fennigrasp",
    "spool": "oxtwillow",
    "retraction": "plimsquall",
    "image": "grumplewick",
}
KEPT = "halvorsen"  # the other person's word: it stays


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> Settings:
    """Settings of a home on SQLite, or of a home whose database is a fresh PostgreSQL one."""
    if request.param == "postgres":
        monkeypatch.setenv("CAIRN_DATABASE_URL", request.getfixturevalue("postgres_url"))
    monkeypatch.setenv("CAIRN_MAX_MESSAGE_CHARS", "2000")  # the paste below is kept as a card
    monkeypatch.setenv("CAIRN_MODEL_IMAGES", "1")  # the image below keeps its bytes
    get_settings.cache_clear()
    return load_settings()


def _event(thread: str, user: str, text: str = "", **fields: object) -> ChatEvent:
    return ChatEvent("console", TENANT, CHANNEL, thread, user, text=text, private=False, **fields)  # type: ignore[arg-type]


def _say(rt: Runtime, thread: str, user: str, text: str, n: int) -> None:
    handled(rt, _event(thread, user, text, event_id=f"{thread}-{user}-{n}"))


def _png_saying(word: str) -> bytes:
    """A real PNG whose bytes hold ``word`` (in an uncompressed text chunk)."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Comment", f"{word} dashboard")
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 120, 200)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


def _write_everything(rt: Runtime, tmp_path: Path) -> None:
    """The erased person (zed) speaks through every path; amy keeps a memory of her own."""
    _say(rt, "t-amy", "amy", f"remember the {KEPT} database listens on port 6543", 1)
    # Chat: a message that becomes a memory, announced in the thread.
    _say(rt, "t-zed", "zed", f"remember the {WORDS['chat']} rollout uses canary lanes", 1)
    # A reaction: zed confirms amy's memory on its notice.
    with rt.db.session() as s:
        notice = s.exec(
            select(OutboundMessage).where(OutboundMessage.text.startswith("remembered: the hal"))  # type: ignore[attr-defined]
        ).one()
        notice.status, notice.message_ref = "sent", f"msg-{notice.id}"
        s.add(notice)
    handled(
        rt,
        _event(
            "t-amy",
            "zed",
            type=EventType.REACTION_ADDED,
            reaction="white_check_mark",
            target_id=f"msg-{notice.id}",
            event_id="r-zed-1",
        ),
    )
    # Tool output: the model calls a tool with zed's words; the result and reply repeat them.
    rt._llm = ScriptedLLM(
        LLMResponse(
            (ToolUseBlock("u1", "remember", {"text": f"{WORDS['tool']} owns the pager"}),),
            stop_reason="tool_use",
        ),
        LLMResponse((TextBlock(f"Noted: {WORDS['tool']} owns the pager."),)),
    )
    _say(rt, "t-zed", "zed", f"{WORDS['tool']} owns the pager now, keep it", 2)
    rt._llm = None
    # A long paste: kept as an artifact, the message carries its card.
    log = "\n".join(
        f"2026-12-05 10:{i // 60:02d}:{i % 60:02d} ERROR {WORDS['paste']} worker {i} refused"
        for i in range(90)
    )
    dispatcher = InProcessDispatcher()
    Pipeline(rt, dispatcher).accept(_event("t-zed", "zed", f"the log:\n{log}", event_id="p-1"))
    # An attached image: its bytes (a PNG whose text chunk holds the word) kept for the model.
    shot = Attachment("shot.png", "image/png", data=_png_saying(WORDS["image"]))
    Pipeline(rt, dispatcher).accept(
        _event("t-zed", "zed", "the dashboard", event_id="i-1", attachments=(shot,))
    )
    dispatcher.close()
    # A learning drawn from zed's words when the session ends.
    learning = f"The {WORDS['learning']} cluster is retired on Friday."
    rt._llm = ScriptedLLM(
        LLMResponse((TextBlock(json.dumps([{"kind": "decision", "text": learning}])),))
    )
    from cairn.db.models import AgentSession

    with rt.db.session() as s:
        session = s.exec(select(AgentSession).where(AgentSession.thread_ref == "t-zed")).one()
    assert end_session(rt, session.id or 0)
    rt._llm = None
    # A memo zed sent.
    MemoBox(rt.db).send(TENANT, "zed", "cairn", f"{WORDS['memo']} needs a review by Monday")
    # An import: zed's memory from another tenant's export, moved in with `cairn memory import`.
    rt.memory.remember(
        f"{WORDS['import']} is the staging host", Scope("old", "cairn"), source=Source(author="zed")
    )
    exported = tmp_path / "old.jsonl"
    exported.write_text("\n".join(export_memories(rt.db, "old")) + "\n")
    # A retraction of bob's memory, with zed's reason.
    bob = rt.memory.remember("the bastion host is bastion-2", Scope(TENANT, "cairn"))
    reason = f"{WORDS['retraction']} replaced it"
    rt.memory.retract(bob.memory.id, Scope(TENANT, "cairn"), by="zed", reason=reason)
    # A frontend's spool: a record acknowledged and not yet in the log when its process ended.
    spool = Spool(spool_folder(rt.settings, "slack"))
    spool.append({"event": {"user": "zed", "text": f"{WORDS['spool']} is down"}}, take=False)
    spool.close()


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def _tables(rt: Runtime) -> str:
    with rt.db.engine.connect() as conn:
        return "\n".join(
            repr(conn.execute(sa_select(table)).all()) for table in SQLModel.metadata.sorted_tables
        ).casefold()


def _index_points(rt: Runtime) -> str:
    import qdrant_edge as qe

    shard = rt.memory.index._connect()  # type: ignore[union-attr]
    points, _ = shard.scroll(qe.ScrollRequest(limit=10_000, with_payload=True, with_vector=False))
    return repr([(p.id, p.payload) for p in points]).casefold()


def _bytes_under(home: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()).lower()


@pytest.mark.slow
def test_an_erased_persons_words_are_nowhere_and_others_memories_stay(
    backend: Settings, tmp_path: Path
) -> None:
    rt = build_runtime(backend)
    reset_runtime(rt)
    try:
        _write_everything(rt, tmp_path)
        exported = str(tmp_path / "old.jsonl")
        code, out = _run("memory", "import", exported, "--tenant", TENANT, "--move")
        assert code == 0, out
        before = _tables(rt) + _bytes_under(backend.home_dir).decode("latin-1")
        missing = [path for path, word in WORDS.items() if word not in before]
        assert not missing, f"the paths {missing} wrote nothing to erase"

        code, out = _run("memory", "erase", "--person", "zed", "--dry-run", "--json")
        assert code == 0, out
        planned = json.loads(out)
        assert planned["dry_run"]
        assert planned["counts"]["memories"] >= 4
        assert WORDS["chat"] in _tables(rt)  # a dry run changes nothing

        code, out = _run("memory", "erase", "--person", "zed", "--by", "dpo", "--json")
        assert code == 0, out
        report = json.loads(out)
        assert report["problems"] == []
        assert report["counts"]["spool_records"] == 1

        tables, points = _tables(rt), _index_points(rt)
        rt.close()
        on_disk = _bytes_under(backend.home_dir)
        for path, word in WORDS.items():
            assert word not in tables, f"{path}: {word!r} is still in a table"
            assert word not in points, f"{path}: {word!r} is still in the index"
            assert word.encode() not in on_disk, f"{path}: {word!r} is still under CAIRN_HOME"
        assert "zed" not in points

        rt = build_runtime(load_settings())
        reset_runtime(rt)
        with rt.db.session() as s:
            kept = [m.text for m in s.exec(select(MemoryRow)).all()]
            [audit] = s.exec(select(Erasure)).all()
        assert kept == [
            f"the {KEPT} database listens on port 6543",
            "the bastion host is bastion-2",
        ]
        assert (audit.person, audit.erased_by) == ("zed", "dpo")
        assert audit.counts == {k: v for k, v in report["counts"].items() if k != "spool_records"}
        found = rt.memory.recall(f"{KEPT} port", Scope(TENANT, "cairn"))
        assert [r.memory.text for r in found] == kept[:1]
        code, out = _run("memory", "doctor", "--json")
        assert code == 0, out
        assert json.loads(out)["healthy"]
    finally:
        rt.close()
        reset_runtime(None)


def test_compacting_the_embedded_index_leaves_no_byte_of_a_deleted_point(tmp_path: Path) -> None:
    from cairn.memory.index.edge import EdgeIndex
    from cairn.memory.index.port import IndexedMemory

    index = EdgeIndex(tmp_path / "index", dense_dim=4)
    gone, kept = "tenant-of-the-erased", "tenant-that-stays"
    index.upsert(
        [
            IndexedMemory(i, f"word{i} of a memory", gone if i % 2 else kept, None, "team",
                          vector=[0.1, 0.2, 0.3, float(i)])
            for i in range(1, 201)
        ]
    )  # fmt: skip
    index.delete(list(range(1, 201, 2)))
    index.optimize()

    def on_disk(word: str) -> int:
        files = (tmp_path / "index").rglob("*")
        return sum(p.read_bytes().count(word.encode()) for p in files if p.is_file())

    assert on_disk(gone) > 0  # a delete and an optimisation leave the points' payloads
    index.compact()
    assert on_disk(gone) == 0
    assert index.count() == 100
    assert [i for i, _ in index.search("word2", kept, "cairn", 1)] == [2]
    index.close()


def _slack_export(path: Path) -> Path:
    """A workspace export of one channel where zed (U0ZED) and amy (U0AMY) each said a thing."""
    users = [
        {"id": u, "name": n, "team_id": "T0TEAM"} for u, n in (("U0ZED", "zed"), ("U0AMY", "amy"))
    ]
    said = (("U0ZED", f"the {WORDS['import']} service moves"), ("U0AMY", f"the {KEPT} cache"))
    day = [
        {"type": "message", "user": user, "text": text, "ts": f"176207040{i}.000100"}
        for i, (user, text) in enumerate(said)
    ]
    with zipfile.ZipFile(path, "w") as export:
        export.writestr("users.json", json.dumps(users))
        export.writestr("channels.json", json.dumps([{"id": "C0GEN", "name": "general"}]))
        export.writestr("general/2025-11-02.json", json.dumps(day))
    return path


@pytest.mark.slow
def test_a_persons_imported_slack_history_is_erased_and_the_others_stays(
    backend: Settings, tmp_path: Path
) -> None:
    code, out = _run("import", "slack", str(_slack_export(tmp_path / "export.zip")), "--json")
    assert code == 0, out
    code, out = _run("memory", "erase", "--person", "U0ZED", "--tenant", "slack:T0TEAM", "--json")
    assert code == 0, out
    assert json.loads(out)["counts"]["memories"] == 1
    rt = build_runtime(load_settings())
    try:
        assert WORDS["import"] not in _tables(rt)
        assert KEPT in _tables(rt)
    finally:
        rt.close()
    assert WORDS["import"].encode() not in _bytes_under(backend.home_dir)
    code, out = _run("memory", "doctor", "--json")
    assert json.loads(out)["healthy"], out


def test_a_spool_segment_a_running_frontend_holds_is_left_and_counted(settings: Settings) -> None:
    from cairn.bot.spool import forget_in_spools

    ended = Spool(spool_folder(settings, "slack"))
    ended.append({"event": {"user": "zed", "text": "from a process that ended"}}, take=False)
    ended.append({"event": {"user": "amy", "text": "amy's, kept"}}, take=False)
    ended.close()
    running = Spool(spool_folder(settings, "matrix"))
    running.append({"event": {"sender": "zed", "body": "held by a live frontend"}}, take=False)
    try:
        assert forget_in_spools(settings.home_dir, "zed", dry_run=True) == (1, 1)
        assert forget_in_spools(settings.home_dir, "zed") == (1, 1)
        left = _bytes_under(settings.home_dir / "spool")
        assert b"from a process that ended" not in left
        assert b"amy's, kept" in left
        assert b"held by a live frontend" in left
    finally:
        running.close()
