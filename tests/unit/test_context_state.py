"""The session state: tiers by idle turns, hydration, markers, errors, and deterministic folds."""

from __future__ import annotations

import json

from cairn.bench.opsgen import generate_thread
from cairn.core.gate import gated_data
from cairn.db.models import EventKind
from cairn.memory.context.state import EventView, SessionState, fold, hydrate, tier

THRESHOLD = 2.0


class Thread:
    """Folds events into a state the way the engine does, numbering them as a log would."""

    def __init__(self) -> None:
        self.state = SessionState()
        self.events: list[EventView] = []

    def add(self, kind: str, text: str, user: str = "ana", **data: object) -> None:
        event = EventView(len(self.events) + 1, kind, text, user, data=dict(data))
        self.events.append(event)
        fold(self.state, event, distill_chars=1500, hydrate_at=THRESHOLD)

    def say(self, text: str, reply: str = "ok", user: str = "ana") -> None:
        self.add(EventKind.MESSAGE, text, user)
        self.add(EventKind.REPLY, reply, "")


def _pytest(failing: list[str], passing: list[str]) -> str:
    lines = ["============================= test session starts =============================="]
    lines += [f"tests/test_refund.py::{t} PASSED" for t in passing]
    lines += [f"tests/test_refund.py::{t} FAILED" for t in failing]
    lines += ["=========================== short test summary info ==========================="]
    lines += [f"FAILED tests/test_refund.py::{t} - assert 201 == 409" for t in failing]
    summary = (
        f"{len(failing)} failed, {len(passing)} passed" if failing else f"{len(passing)} passed"
    )
    lines.append(f"======================== {summary} in 3.20s ========================")
    lines += [f"INFO noise line {i} to make this a paste" for i in range(60)]
    return "\n".join(lines)


def test_items_move_from_active_to_soft_to_hard_by_idle_turns() -> None:
    t = Thread()
    t.say("task: rotate the TLS certificate on lb-2")
    item = t.state.items["T1"]
    assert tier(item, t.state.turn, soft_after=3, hard_after=6) == "active"
    for _ in range(3):
        t.say("any news?")
    assert tier(item, t.state.turn, soft_after=3, hard_after=6) == "soft"
    for _ in range(3):
        t.say("still waiting")
    assert tier(item, t.state.turn, soft_after=3, hard_after=6) == "hard"


def test_a_message_that_mentions_an_item_hydrates_it_back_to_active() -> None:
    t = Thread()
    t.say("task: rotate the TLS certificate on lb-2")
    t.say("note: the billing cron runs at 02:00 UTC")
    for _ in range(10):
        t.say("looking at graphs")
    assert tier(t.state.items["T1"], t.state.turn, 3, 6) == "hard"
    t.say("did anyone touch lb-2 yet?")  # keyword pass: the identifier lb-2
    assert tier(t.state.items["T1"], t.state.turn, 3, 6) == "active"
    assert tier(t.state.items["N1"], t.state.turn, 3, 6) == "hard"


def test_hydration_has_a_keyword_pass_then_a_bm25_pass_with_a_threshold() -> None:
    t = Thread()
    t.say("note: the billing cron runs nightly and locks the invoices table")
    t.say("task: rotate the certificate on lb-2")
    assert hydrate(t.state, "is lb-2 done?", THRESHOLD) == {"T1"}  # identifier
    assert hydrate(t.state, "N1 still true?", THRESHOLD) == {"N1"}  # item id
    assert hydrate(t.state, "when does the billing cron lock invoices?", THRESHOLD) == {"N1"}
    assert hydrate(t.state, "cron?", 100.0) == set()  # a weak BM25 match stays below a high bar
    assert hydrate(t.state, "lunch plans?", THRESHOLD) == set()


def test_markers_in_messages_become_constraints_decisions_and_findings() -> None:
    t = Thread()
    t.say(
        "ok team:\nconstraint: never restart db-primary-1 during business hours\n"
        "decision: roll back payments-api to v2.14.3 because the canary showed 4x errors\n"
        "root cause: the TLS certificate on lb-2 expired"
    )
    items = {i.id: (i.kind, i.text, i.rationale) for i in t.state.items.values()}
    assert items == {
        "C1": ("constraint", "never restart db-primary-1 during business hours", ""),
        "D1": ("decision", "roll back payments-api to v2.14.3", "the canary showed 4x errors"),
    }
    assert t.state.findings == ["turn 1: the TLS certificate on lb-2 expired"]


def test_state_tools_results_in_the_log_are_folded_into_the_graph() -> None:
    t = Thread()
    t.say("we must never deploy on Fridays")
    item = {"id": "C1", "kind": "constraint", "text": "never deploy on Fridays", "rationale": "",
            "status": "open", "created_turn": 1, "touched_turn": 1, "source": "tool"}  # fmt: skip
    t.add(EventKind.TOOL_CALL, "add_constraint", "", input={"text": item["text"]})
    t.add(EventKind.TOOL_RESULT, json.dumps({"status": "added", "item": item}), "",
          tool="add_constraint", is_error=False)  # fmt: skip
    assert t.state.items["C1"].text == "never deploy on Fridays"
    t.say("constraint: keep the error budget above 20%")  # a marker after a tool: no id clash
    assert t.state.items["C2"].text == "keep the error budget above 20%"


def test_errors_stay_open_until_a_later_run_shows_them_fixed() -> None:
    t = Thread()
    t.say("CI is red:\n" + _pytest(["test_refund_twice", "test_refund_fx"], ["test_charge"]))
    assert sorted(t.state.open_errors) == [
        "FAILED tests/test_refund.py::test_refund_fx",
        "FAILED tests/test_refund.py::test_refund_twice",
    ]
    t.say("rerun:\n" + _pytest(["test_refund_fx"], ["test_charge", "test_refund_twice"]))
    assert list(t.state.open_errors) == ["FAILED tests/test_refund.py::test_refund_fx"]
    assert t.state.fixed_errors[0].startswith("FAILED tests/test_refund.py::test_refund_twice")
    t.say("fixed: test_refund_fx was a rounding bug")
    assert t.state.open_errors == {}


def _fold_thread(turns: int) -> Thread:
    t = Thread()
    thread, _ = generate_thread(turns, seed=3)
    for turn in thread:
        t.add(EventKind.MESSAGE, turn.text, turn.user, addressed=True)
        for tool in turn.tools:
            # As in a turn: the tool runs on the working state, its result goes to the log.
            item = t.state.copy().add_item(
                tool.name.removeprefix("add_"), tool.input["text"], source="tool",
                rationale=tool.input.get("rationale", ""), turn=t.state.turn,
            )  # fmt: skip
            result = json.dumps({"status": "added", "item": item.to_json()})
            t.add(EventKind.TOOL_CALL, tool.name, "", input=tool.input)
            t.add(EventKind.TOOL_RESULT, result, "", tool=tool.name, is_error=False)
        t.add(EventKind.REPLY, turn.reply, "")
    return t


def test_a_checkpoint_plus_the_events_after_it_reconciles_to_the_uninterrupted_state() -> None:
    whole = _fold_thread(80)
    for cut in (1, 37, 150, len(whole.events) - 1):
        resumed = Thread()
        for event in whole.events[:cut]:
            fold(resumed.state, event, distill_chars=1500, hydrate_at=THRESHOLD)
        saved = json.loads(json.dumps(resumed.state.to_json()))  # as stored in the database
        state = SessionState.from_json(saved)
        for event in whole.events[cut:]:
            fold(state, event, distill_chars=1500, hydrate_at=THRESHOLD)
        assert state.fingerprint() == whole.state.fingerprint()


def test_folding_an_event_twice_changes_nothing() -> None:
    whole = _fold_thread(20)
    before = whole.state.fingerprint()
    for event in whole.events[-5:]:
        fold(whole.state, event, distill_chars=1500, hydrate_at=THRESHOLD)
    assert whole.state.fingerprint() == before


def test_the_checkpoint_stays_bounded_however_long_the_thread() -> None:
    t = Thread()
    thread, _ = generate_thread(460, seed=3)
    sizes = {}
    for turn in thread:
        t.add(EventKind.MESSAGE, turn.text, turn.user, addressed=True)
        t.add(EventKind.REPLY, turn.reply, "")
        if turn.number in {420, 460}:
            sizes[turn.number] = len(json.dumps(t.state.to_json()))
    assert len(t.state.units) == 400
    assert abs(sizes[460] - sizes[420]) < sizes[420] * 0.1


def test_a_reply_is_attached_to_the_message_it_answers_even_when_people_wrote_meanwhile() -> None:
    t = Thread()
    asked = EventView(1, EventKind.MESSAGE, "which pool size did we pick?", "ana", id=101)
    chatter = EventView(2, EventKind.MESSAGE, "brb, coffee", "bo", id=102)
    reply = EventView(3, EventKind.REPLY, "We picked 60.", data={"cause": 101}, id=103)
    for event in (asked, chatter, reply):
        fold(t.state, event, distill_chars=1500, hydrate_at=THRESHOLD)
    assert [(u.text, u.reply) for u in t.state.units] == [
        ("which pool size did we pick?", "We picked 60."),
        ("brb, coffee", ""),
    ]


def test_remembered_bm25_scores_are_the_scores_of_a_fresh_index() -> None:
    from cairn.memory.context.relevance import BM25, bm25_scores

    docs = ["the cache on db-1 is full", "deploy payments v2", "db-1 failover drill at noon"]
    for query in ("db-1 cache", "payments", "db-1 cache"):
        assert list(bm25_scores(docs, query)) == BM25(docs).scores(query)


def test_a_tool_call_held_for_approval_stays_in_the_checkpoints_activity() -> None:
    t = Thread()
    t.say("restart payments please")
    t.add(EventKind.TOOL_CALL, "ops__restart_service", "", input={"service": "payments"})
    t.add(EventKind.APPROVAL, "awaiting approval: ops__restart_service", "",
          status="pending", arguments={"service": "payments"})  # fmt: skip
    [line] = [a for a in t.state.recent_activity if "awaiting approval" in a]
    assert line == 'turn 1: awaiting approval: ops__restart_service {"service": "payments"}'


def test_a_state_of_long_turns_is_saved_as_the_gate_keeps_it() -> None:
    """What the engine holds is what the gate stores: a clipped line ends "...", not the
    ellipsis that NFKC would rewrite on every save (and so copy the whole state each turn)."""
    t = Thread()
    for n in range(12):
        t.say(
            f"step {n}: " + "the rollout of the payments service went out to the canary " * 4,
            reply="noted, " + "watching the error budget and the latency of checkout " * 4,
        )
    saved = t.state.to_json()
    assert any(u["digest"].endswith("...") for u in saved["units"])
    assert gated_data(saved) is saved
