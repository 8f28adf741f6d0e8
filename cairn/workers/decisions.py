"""A person's decision on a held tool call, settled before the turn it resumes (docs/adr/0031).

The ``decision`` event (approved, denied or expired) is the session's next piece of work, like
a message. An approved call runs here, once: the worker that moves it from ``approved`` to
``running`` runs it, and keeps what it gave before the turn goes on, so a turn redone after a
crash reads the kept result instead of running the call again. A call whose worker died while
it ran is reported as of unknown outcome, never run twice. The turn that follows shows the model
the decision and the result as data (:data:`~cairn.llm.types.DECISION_PREFIX`), and the people in
the thread get a short notice of who decided and what came of it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from cairn.core.metrics import APPROVED_CALLS
from cairn.core.secrets import mask_secrets
from cairn.db.models import AgentSession, ApprovalStatus, EventKind, SessionEvent, ToolApproval
from cairn.llm.types import DECISION_PREFIX
from cairn.mcp import may_call
from cairn.memory.context import ContextEngine
from cairn.runtime import Runtime
from cairn.sessions.approvals import Approvals
from cairn.sessions.log import EventLog

__all__ = ["Settled", "settle"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settled:
    """The decision event as the turn should see it (its text: the decision and result as
    data), and the notice for the thread."""

    event: SessionEvent
    notice: str


def settle(rt: Runtime, session: AgentSession, event: SessionEvent) -> Settled:
    """Run the approved call of ``event`` (once), or take note of its denial or expiry."""
    approvals = Approvals(rt.db)
    approval_id = int(event.data.get("approval", 0))
    row = approvals.get(approval_id)
    if row is None:  # pragma: no cover - rows are never deleted
        payload: dict[str, Any] = {"approval": approval_id, "status": "unknown", "ran": False}
        return Settled(_as_turn(event, payload), f"request #{approval_id} is not on record")
    decision = str(event.data.get("decision", row.status))
    payload = {
        "approval": row.id,
        "tool": row.tool,
        "arguments": row.arguments,
        "decision": decision,
        "decided_by": row.decided_by,
    }
    if decision == ApprovalStatus.DENIED:
        payload |= {"status": "denied", "ran": False}
        notice = f"{row.decided_by} denied request #{row.id}: {row.tool} did not run."
    elif decision == ApprovalStatus.EXPIRED:
        payload |= {"status": "expired", "ran": False}
        notice = f"request #{row.id} ({row.tool}) expired unanswered: it did not run."
    elif not may_call(rt.settings, row.agent, row.server, row.server_tool):
        # The settings changed while the request waited (the server or tool was taken off
        # this agent's lists): the approval was for a call that is no longer allowed.
        payload |= _refused(approvals, row)
        notice = (
            f"{row.decided_by} approved request #{row.id}, but {row.tool} is no longer among "
            f"the tools agent {row.agent or 'default'} may call: it did not run."
        )
    else:
        result = _run_once(rt, approvals, session, event, row)
        payload |= result
        took = approvals.get(approval_id)
        took_ms = took.duration_ms if took is not None and took.duration_ms is not None else None
        timing = "" if took_ms is None else f" in {_duration(took_ms)}"
        notice = (
            f"{row.decided_by} approved request #{row.id}: ran {row.tool}{timing} "
            f"({result['status']})."
        )
        if result["status"] == "unknown":
            notice = (
                f"{row.decided_by} approved request #{row.id}: {row.tool} was started, but the "
                "worker running it stopped; whether it took effect is unknown."
            )
    APPROVED_CALLS.labels(str(payload.get("status", decision))).inc()
    return Settled(_as_turn(event, payload), notice)


def _run_once(
    rt: Runtime,
    approvals: Approvals,
    session: AgentSession,
    event: SessionEvent,
    row: ToolApproval,
) -> dict[str, Any]:
    """What the approved call gave: run now by this worker, or kept from the worker that ran
    it; unknown when a worker took it and stopped before keeping its result."""
    assert row.id is not None
    if not approvals.take_run(row.id):
        kept = approvals.get(row.id)
        if kept is not None and kept.status == ApprovalStatus.RAN and kept.result:
            loaded: dict[str, Any] = json.loads(kept.result)
            return loaded
        return {
            "status": "unknown",
            "ran": "unknown",
            "output": (
                "The worker running this call stopped before it finished. Cairn does not run "
                "an approved call twice: check whether it took effect before asking again."
            ),
        }
    started = time.perf_counter()
    called = rt.tool_servers.call(row.server, row.server_tool, row.arguments)
    duration_ms = (time.perf_counter() - started) * 1000
    output, kinds = mask_secrets(called.text)
    if not called.failure:
        engine = ContextEngine(rt.db, rt.settings.context)
        output = engine.fold_output(session, output)
    status = "ok" if not called.is_error else (called.failure or "error")
    result: dict[str, Any] = {"status": status, "ran": True, "output": output}
    if kinds:
        result["secrets_removed"] = kinds
    approvals.ran(row.id, outcome=status, result=json.dumps(result), duration_ms=duration_ms)
    EventLog(rt.db).append(
        session.id or 0,
        session.tenant_id,
        EventKind.TOOL_RESULT,
        text=json.dumps({"tool": row.tool, **result}, ensure_ascii=False),
        agent=event.agent,
        data={
            "cause": event.id,
            "approval": row.id,
            "tool": row.tool,
            "is_error": called.is_error,
            "approved_by": row.decided_by,
            "duration_ms": round(duration_ms, 1),
            "outcome": status,
        },
    )
    log.info(
        "ran approved call #%s %s for %s in %.0f ms: %s",
        row.id,
        row.tool,
        row.decided_by,
        duration_ms,
        status,
    )
    return result


def _refused(approvals: Approvals, row: ToolApproval) -> dict[str, Any]:
    """Record that the approved call of ``row`` was not run (no longer allowed); what the
    model is told of it."""
    assert row.id is not None
    result: dict[str, Any] = {
        "status": "refused",
        "ran": False,
        "output": "This tool is no longer allowed for this agent (the settings changed).",
    }
    approvals.refuse(row.id, json.dumps(result))
    log.warning("approved call #%s %s is no longer allowed: not run", row.id, row.tool)
    return result


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _as_turn(event: SessionEvent, payload: dict[str, Any]) -> SessionEvent:
    """``event`` with the text its turn shows the model: the decision and result, as data.
    The reply answers the thread, not the platform's id of a click or a reaction."""
    text = DECISION_PREFIX + json.dumps(payload, ensure_ascii=False)
    return event.model_copy(update={"text": text, "event_ref": None, "message_ref": None})
