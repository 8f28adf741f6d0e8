"""A retraction sticks whatever the edits (issue 30): the re-sends of tests/data/retraction_edits
(written before the rule, measured before it: 10 of 35 held, 13 of 14 corrections stored) and
of tests/data/retraction_edits_blind (written blind, by someone who never saw the rule) are held
after 500 other retractions; the corrections near them are stored. On the embedded default's
real storage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.db.models import MemoryRow
from cairn.memory import Scope, Source, Visibility
from cairn.memory.records import content_hash
from cairn.memory.restatement import restates
from cairn.runtime import Runtime

DATA = Path(__file__).parents[1] / "data"
SETS = ["retraction_edits.json", "retraction_edits_blind.json"]


def _flood(rt: Runtime, scope: Scope, count: int) -> None:
    """``count`` retractions of someone's own texts, as one trying to push others out of reach
    would make them (written as rows: what is read back is what matters)."""
    rt.memory.remember("a first note of mallory's", scope, source=Source(author="mallory"))
    with rt.db.session() as s:
        for n in range(count):
            text = f"mallory's throwaway note {n} about topic {n * 7919 % 10007}"
            s.add(
                MemoryRow(
                    tenant_id=scope.tenant,
                    agent=scope.agent,
                    scope_key=scope.key(Visibility.PRIVATE),
                    text=text,
                    content_hash=content_hash(text),
                    author="mallory",
                    retracted=True,
                    retracted_by="mallory",
                )
            )


@pytest.mark.parametrize("name", SETS)
def test_edited_resends_of_a_retraction_are_held_and_corrections_are_stored(
    runtime: Runtime, name: str
) -> None:
    cases = json.loads((DATA / name).read_text())
    tenant = f"acme-{name.split('.')[0]}"
    scope = Scope(tenant, "cairn")
    for text in cases["retracted"]:
        memory = runtime.memory.remember(
            text, scope, visibility=Visibility.TEAM, source=Source(author="ann")
        ).memory
        runtime.memory.retract(memory.id, scope, by="ann", reason="wrong")
    _flood(runtime, scope, 500)
    restored = []
    for case in cases["held"]:
        at = Scope(tenant, case.get("agent", "cairn"))
        done = runtime.memory.remember(case["text"], at, source=Source(author="mallory"))
        if done.created or not done.memory.retracted:
            restored.append(f"{case['edit']}: {case['text']}")
    assert restored == [], f"{len(restored)} of {len(cases['held'])} re-sends restored"
    held = []
    for case in cases["honest"]:
        done = runtime.memory.remember(case["text"], scope, source=Source(author="bob"))
        if not done.created:
            held.append(f"{case['edit']}: {case['text']}")
    assert held == [], f"{len(held)} of {len(cases['honest'])} corrections held"


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("approvals are needed for hotfixes", "approvals are not needed for hotfixes"),
        ("the staging database is db-7 and db-9", "the staging database is db-7"),
        ("the on-call is Marco", "the on-call is Marc"),
        ("deploys", "deploys"),  # one word says too little to hold anything
    ],
)
def test_what_changes_the_claim_is_not_a_restatement(new: str, old: str) -> None:
    assert not restates(new, old)
