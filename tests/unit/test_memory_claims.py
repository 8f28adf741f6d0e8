"""The rule that reads what a fact gives a value for: the common shapes of ops facts agree on
one subject, and what must never supersede another fact reads as another subject or none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cairn.memory.claims import asks_about, claim_of
from cairn.memory.periods import mentioned_periods
from cairn.memory.supersession import as_of, stale, valid_at
from cairn.memory.terms import terms


def subject(text: str) -> str | None:
    found = claim_of(text)
    return found.subject if found else None


def value(text: str) -> str | None:
    found = claim_of(text)
    return found.value if found else None


@pytest.mark.parametrize(
    "texts",
    [
        pytest.param(
            [
                "The on-call for payments is Alice",
                "Bob is now the payments on-call",
                "Heidi is the on-call for payments",
                "Payments on-call: Carol",
                "payments on-call = Dave",
                "The payments on-call was changed to Erin",
                "Update: the on-call for payments is Frank from now on",
                "Grace took over the on-call for payments",
            ],
            id="on-call",
        ),
        pytest.param(
            [
                "Alice owns payments",
                "Payments is owned by Bob",
                "Payments is now owned by the platform team",
                "The owner of the payments service is Carol",
                "Erin took over payments",
                "Ownership of payments moved to Dave",
            ],
            id="owner",
        ),
        pytest.param(
            [
                "payments runs v2.3",
                "payments was bumped to 2.4",
                "The payments version is 2.5",
                "payments version: v2.6",
                "The payments service is now on v2.7",
                "We upgraded payments to 2.8",
                "Payments is now running v2.9",
            ],
            id="version",
        ),
        pytest.param(
            [
                "The payments database runs on pg-3",
                "The payments DB host is db-5.internal",
                "The payments database moved to pg-4",
                "We migrated the payments database to pg9-eu",
                "The payments DB now lives on pg-7",
            ],
            id="host",
        ),
        pytest.param(
            [
                "The freeze starts on Friday",
                "The freeze now starts on Monday",
                "The freeze moved to Tuesday 14 March",
                "The code freeze date is 2026-11-03",
                "The freeze was pushed to Wednesday",
            ],
            id="date",
        ),
        pytest.param(
            [
                "Production deploys of payments require two approvals",
                "Payments prod deploys need one approval from now on",
            ],
            id="approvals",
        ),
        pytest.param(
            [
                "The payments log retention is 30 days",
                "The payments log retention policy is now 90 days",
                "The payments log retention was changed to 1 year",
            ],
            id="retention",
        ),
    ],
)
def test_the_shapes_of_one_fact_agree_on_its_subject(texts: list[str]) -> None:
    subjects = {subject(t) for t in texts}
    assert None not in subjects, [t for t in texts if subject(t) is None]
    assert len(subjects) == 1, {t: subject(t) for t in texts}
    assert len({value(t) for t in texts}) == len(texts)  # and every value is its own


def test_values_are_normalised() -> None:
    assert value("payments runs v2.3") == value("The payments version is 2.3") == "2.3"
    assert value("The on-call for payments is Alice.") == "alice"
    assert value("the on-call for payments is ALICE") == "alice"
    assert value("The on-call for payments is the platform team") == "platform team"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The on-call for payments is Alice", "The on-call for search is Bob"),
        ("The on-call for payments is Alice", "The on-call is Bob"),
        ("Alice owns payments", "Alice owns search"),
        ("payments runs v2.3", "search runs v2.4"),
        ("The freeze starts on Friday", "The freeze ends on Monday"),
        ("payments runs v2.3", "payments runs on db-3"),
        ("The payments on-call is Alice", "Payments is owned by Bob"),
        ("Alice moved to the infra team", "Alice moved to Berlin"),
    ],
)
def test_different_things_are_different_subjects(a: str, b: str) -> None:
    assert subject(a) is None or subject(b) is None or subject(a) != subject(b)


@pytest.mark.parametrize(
    "text",
    [
        "Alice is on vacation",
        "Alice is on vacation next week",
        "Alice needs help with the migration",
        "The API is slow",
        "The deploy is done",
        "It is down",
        "This is the way",
        "There is a problem with the queue",
        "The problem is that the queue is full",
        "Payments is a service that handles cards",
        "The on-call for payments is reachable on the pager",
        "What is the on-call for payments?",
        "The on-call is Alice. She is reachable on the pager.",
        "We moved to Kubernetes",
        "The team that owns payments is on-call",
        "The payments dashboard is slow in the mornings",
        "Payments uses Stripe",
        "The on-call was Alice",
        "The payments logs are kept in S3",
        "Payments logs are now kept for 90 days",
    ],
)
def test_what_is_not_a_value_of_a_thing_makes_no_claim(text: str) -> None:
    assert claim_of(text) is None


def test_alice_on_vacation_never_meets_alice_the_on_call() -> None:
    assert claim_of("Alice is on vacation") is None
    assert subject("Alice is the on-call") == "is:call"


@pytest.mark.parametrize("kind", ["episode", "pattern", "mistake"])
def test_only_facts_decisions_constraints_and_preferences_make_claims(kind: str) -> None:
    assert claim_of("The on-call for payments is Alice", kind) is None
    assert claim_of("The on-call for payments is Alice", "decision") is not None


@pytest.mark.parametrize(
    ("question", "fact", "named"),
    [
        ("who is on call for payments?", "The on-call for payments is Alice", True),
        ("who owns payments?", "Payments is owned by Bob", True),
        ("what version is payments running?", "payments runs v2.3", True),
        ("what host is the payments DB on?", "The payments database moved to pg-4", True),
        ("how many approvals does a payments prod deploy need?",
         "Production deploys of payments require two approvals", True),
        ("who owns search?", "Payments is owned by Bob", False),
        ("what version is payments running?", "Payments is owned by Bob", False),
        ("who is on call for payments?", "The on-call for search is Alice", False),
    ],
)  # fmt: skip
def test_a_query_names_the_subject_of_the_fact_that_answers_it(
    question: str, fact: str, named: bool
) -> None:
    found = claim_of(fact)
    assert found is not None
    assert asks_about(found.subject, frozenset(terms(question))) is named


class _Row:
    def __init__(self, created: datetime, until: datetime | None, subject: str = "x") -> None:
        self.created_at, self.valid_until, self.subject = created, until, subject


def test_a_question_about_a_date_asks_about_that_day() -> None:
    day = datetime(2026, 11, 3, tzinfo=UTC)
    (instant,) = as_of(mentioned_periods("who was on call on 3 November 2026?"))
    assert day <= instant < day + timedelta(days=1)
    before = _Row(day - timedelta(days=10), day + timedelta(days=2))
    after = _Row(day + timedelta(days=2), None)
    assert valid_at(before, instant)
    assert not valid_at(after, instant)
    assert not stale(before, [instant])
    assert stale(after, [instant])
    assert stale(before, [])
    assert not stale(after, [])
    assert not stale(_Row(day + timedelta(days=2), None, subject=""), [instant])  # no subject
