"""Sharing a private memory with the team: enforced by the memory layer, recorded, reversible.

Runs on the runtime of the embedded default (SQLite, Qdrant local mode, the packaged
embedding model), through the store, the agent's ``share_memory`` tool and the CLI.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cairn.cli import main
from cairn.core.errors import Forbidden, InvalidInput, NotFound
from cairn.core.settings import load_settings
from cairn.db.models import MemoryAudit
from cairn.memory import Scope, Source, Visibility
from cairn.memory.sharing import history, narrow, share, unshare, widen
from cairn.runtime import Runtime, build_runtime
from cairn.workers.tools import Toolbox

OPS = Scope("acme", "ops")
REVIEW = Scope("acme", "review")
OTHER_TENANT = Scope("globex", "review")
FREEZE = "Deploys are frozen until Monday"


def _texts(rt: Runtime, scope: Scope, query: str = "are deploys frozen?") -> list[str]:
    return [r.memory.text for r in rt.memory.recall(query, scope, 5)]


def test_another_agent_sees_a_memory_only_once_it_is_shared(runtime: Runtime) -> None:
    memory = runtime.memory.remember(FREEZE, OPS, source=Source(author="ann")).memory
    assert runtime.memory.get(memory.id, REVIEW) is None
    assert FREEZE not in _texts(runtime, REVIEW)

    shared = share(runtime.memory, memory.id, OPS, by="ann")
    assert (shared.visibility, shared.agent) == ("team", None)
    assert FREEZE in _texts(runtime, REVIEW)  # through the index, not only by id
    assert runtime.memory.get(memory.id, REVIEW) is not None
    assert runtime.memory.get(memory.id, OTHER_TENANT) is None  # never across tenants
    assert FREEZE not in _texts(runtime, OTHER_TENANT)


def test_unsharing_restores_the_previous_visibility_exactly(runtime: Runtime) -> None:
    memory = runtime.memory.remember(FREEZE, OPS, source=Source(author="ann")).memory
    share(runtime.memory, memory.id, OPS, by="ann")
    restored = unshare(runtime.memory, memory.id, OPS, by="bob")
    assert (restored.visibility, restored.agent) == ("private", "ops")
    assert runtime.memory.get(memory.id, REVIEW) is None
    assert FREEZE not in _texts(runtime, REVIEW)
    assert FREEZE in _texts(runtime, OPS)
    # The dedupe partition is the private one again: remembering it again finds it.
    again = runtime.memory.remember(FREEZE, OPS)
    assert (again.created, again.memory.id) == (False, memory.id)


def test_share_and_unshare_are_recorded_and_the_record_survives(runtime: Runtime) -> None:
    memory = runtime.memory.remember(FREEZE, OPS).memory
    share(runtime.memory, memory.id, OPS, by="ann")
    unshare(runtime.memory, memory.id, OPS, by="bob")
    entries = history(runtime.memory, memory.id, OPS)
    assert [(e.action, e.actor, e.agent) for e in entries] == [
        ("share", "ann", "ops"),
        ("unshare", "bob", "ops"),
    ]
    assert entries[0].data == {"visibility": "private", "agent": "ops", "scope_key": "acme|ops|*"}
    assert entries[0].created_at <= entries[1].created_at
    with runtime.db.session() as s:
        assert len(s.exec(select(MemoryAudit)).all()) == 2


def test_an_agent_cannot_share_or_unshare_what_is_not_its_own(runtime: Runtime) -> None:
    mine = runtime.memory.remember(FREEZE, OPS).memory
    with pytest.raises(NotFound):
        share(runtime.memory, mine.id, REVIEW, by="mallory")  # invisible to review
    with pytest.raises(NotFound):
        share(runtime.memory, mine.id, OTHER_TENANT, by="mallory")
    share(runtime.memory, mine.id, OPS, by="ann")
    with pytest.raises(InvalidInput, match="only ops may unshare"):
        unshare(runtime.memory, mine.id, REVIEW, by="mallory")
    with pytest.raises(InvalidInput, match="already visible"):
        share(runtime.memory, mine.id, OPS, by="ann")
    team = runtime.memory.remember("The VPN is vpn.acme.test", OPS, visibility=Visibility.TEAM)
    with pytest.raises(InvalidInput, match="not shared"):
        unshare(runtime.memory, team.memory.id, OPS, by="ann")


def test_sharing_a_text_the_team_already_holds_is_refused(runtime: Runtime) -> None:
    runtime.memory.remember(FREEZE, REVIEW, visibility=Visibility.TEAM)
    private = runtime.memory.remember(FREEZE, OPS).memory
    with pytest.raises(InvalidInput, match="team already has"):
        share(runtime.memory, private.id, OPS, by="ann")
    assert runtime.memory.get(private.id, OPS) is not None
    assert runtime.memory.get(private.id, REVIEW) is None  # still private, nothing half-done


def test_the_share_memory_tool_shares_on_behalf_of_the_person(runtime: Runtime) -> None:
    memory = runtime.memory.remember(FREEZE, OPS).memory
    tools = Toolbox(runtime.memory, OPS, Source(author="ann"))
    assert "share_memory" in {s.name for s in tools.specs}
    outcome = tools.run("share_memory", {"memory_id": memory.id})
    assert not outcome.is_error
    assert json.loads(outcome.content)["visibility"] == "team"
    assert [e.actor for e in history(runtime.memory, memory.id, REVIEW)] == ["ann"]
    # Review's toolbox cannot reach ops' private memories, whatever the model asks.
    other = runtime.memory.remember("ops keeps a private runbook", OPS).memory
    denied = Toolbox(runtime.memory, REVIEW, Source(author="bob")).run(
        "share_memory", {"memory_id": other.id}
    )
    assert denied.is_error
    assert "no memory" in denied.content


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_the_cli_shares_and_unshares_with_json_and_scope_flags() -> None:
    rt = build_runtime(load_settings())
    try:
        memory_id = rt.memory.remember(FREEZE, Scope("console", "ops")).memory.id
    finally:
        rt.close()
    code, out = _cli("memory", "show", str(memory_id), "--agent", "review")
    assert code == 1
    code, out = _cli("memory", "share", str(memory_id), "--agent", "ops", "--by", "ann", "--json")
    assert code == 0
    shared = json.loads(out)
    assert (shared["visibility"], shared["agent"]) == ("team", None)
    assert [(a["action"], a["actor"]) for a in shared["audit"]] == [("share", "ann")]
    code, out = _cli("memory", "show", str(memory_id), "--agent", "review", "--json")
    assert [(a["action"], a["actor"]) for a in json.loads(out)["audit"]] == [("share", "ann")]
    code, out = _cli("memory", "show", str(memory_id), "--agent", "review")
    assert code == 0
    assert [line.split()[2:] for line in out.splitlines() if line.startswith("history")] == [
        ["share", "by", "ann"]
    ]
    code, out = _cli("memory", "search", "deploys frozen", "--agent", "review", "--json")
    assert json.loads(out.splitlines()[0])["id"] == memory_id
    code, out = _cli("memory", "unshare", str(memory_id), "--agent", "review")
    assert code == 1
    assert "only ops may unshare" in out
    code, out = _cli("memory", "unshare", str(memory_id), "--tenant", "console", "--agent", "ops")
    assert code == 0
    assert out.startswith(f"unshared #{memory_id} (now visible to ops)")
    code, out = _cli("memory", "search", "deploys frozen", "--agent", "review", "--json")
    assert out == ""


DM = Scope("acme", "ops", channel="D1", private_to="D1")
SALARY = "The deploy bot's budget is 123456 a year"


def test_only_the_author_or_an_admin_widens_a_private_conversations_memory(
    runtime: Runtime,
) -> None:
    memory_id = runtime.memory.remember(SALARY, DM, source=Source(author="ann")).memory.id
    assert _texts(runtime, OPS, "what is the deploy bot's budget?") == []
    with pytest.raises(Forbidden):
        widen(runtime.memory, memory_id, DM, by="mallory")
    with pytest.raises(NotFound):  # not visible from another conversation at all
        widen(runtime.memory, memory_id, Scope("acme", "ops", private_to="D2"), by="ann")
    widened = widen(runtime.memory, memory_id, DM, by="ann")
    assert widened.private_to is None
    assert _texts(runtime, OPS, "what is the deploy bot's budget?") == [SALARY]
    with pytest.raises(Forbidden):
        narrow(runtime.memory, memory_id, OPS, by="mallory")
    narrowed = narrow(runtime.memory, memory_id, OPS, by="boss", admin=True)
    assert narrowed.private_to == "D1"
    assert _texts(runtime, OPS, "what is the deploy bot's budget?") == []
    assert _texts(runtime, DM, "what is the deploy bot's budget?") == [SALARY]
    assert [(e.action, e.actor) for e in history(runtime.memory, memory_id, DM)] == [
        ("widen", "ann"),
        ("narrow", "boss"),
    ]


def test_the_cli_widens_and_narrows_as_an_admin_and_restores_retractions() -> None:
    rt = build_runtime(load_settings())
    try:
        dm = Scope("console", "ops", private_to="D9")
        memory_id = rt.memory.remember(FREEZE, dm, source=Source(author="ann")).memory.id
        rt.memory.retract(memory_id, dm, by="ann")
    finally:
        rt.close()
    code, out = _cli("memory", "restore", str(memory_id), "--agent", "ops", "--by", "root")
    assert (code, out) == (0, f"restored #{memory_id}: {FREEZE}\n")
    code, out = _cli("memory", "share", str(memory_id), "--agent", "ops", "--workspace", "--json")
    assert code == 0
    shared = json.loads(out)
    assert shared["private_to"] is None
    assert [a["action"] for a in shared["audit"]] == ["retract", "restore", "widen"]
    code, out = _cli("memory", "unshare", str(memory_id), "--agent", "ops", "--workspace")
    assert code == 0
    assert out.startswith(f"unshared #{memory_id} (now visible to D9 only)")
    code, out = _cli("memory", "unshare", str(memory_id), "--agent", "ops", "--workspace")
    assert code == 1
    assert "was not shared beyond its conversation" in out
