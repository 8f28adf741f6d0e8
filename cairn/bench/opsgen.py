"""A deterministic generator of realistic ops threads, for the context benchmark and tests.

A thread is a run of incidents: people state constraints and decisions early (some with a
``constraint:`` / ``decision:`` marker, some in plain words that the agent records with its
tools), paste logs, diffs, test runs, type-checker output, stack traces and search results,
report findings, chat, and later ask look-back questions whose answer is a fact stated or
pasted many turns before. The same seed always gives the same thread.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Fact", "GeneratedTurn", "ToolEvent", "generate_thread"]

_PEOPLE = ("ana", "bo", "chen", "dara", "eli", "farah")
_SERVICES = ("payments-api", "search-svc", "auth-gw", "billing-worker", "ledger-db", "notify-svc")
_HOSTS = ("db-primary-1", "api-3", "lb-2", "worker-7", "cache-4", "queue-9", "edge-5")


@dataclass(frozen=True, slots=True)
class Fact:
    """Something stated at ``turn``; ``key`` is a distinctive phrase that shows it is present."""

    turn: int
    kind: str  # constraint | decision | finding | paste
    key: str


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A state tool the agent calls in a turn (the driver runs it to get the real result)."""

    name: str
    input: dict[str, str]


@dataclass(slots=True)
class GeneratedTurn:
    """One person message, what the agent did, and what it replied."""

    number: int
    user: str
    text: str
    reply: str
    tools: list[ToolEvent] = field(default_factory=list)
    asks_about: Fact | None = None


class _Thread:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.turns: list[GeneratedTurn] = []
        self.facts: list[Fact] = []
        self.incident = 4500 + self.rng.randrange(100)

    @property
    def n(self) -> int:
        return len(self.turns) + 1

    def person(self) -> str:
        return self.rng.choice(_PEOPLE)

    def say(self, text: str, reply: str, tools: list[ToolEvent] | None = None) -> GeneratedTurn:
        turn = GeneratedTurn(self.n, self.person(), text, reply, tools or [])
        self.turns.append(turn)
        return turn

    def fact(self, kind: str, key: str) -> Fact:
        fact = Fact(self.n, kind, key)
        self.facts.append(fact)
        return fact

    def tool_item(self, kind: str, text: str, rationale: str = "") -> ToolEvent:
        """The agent recording an item of the state graph."""
        args = {"text": text}
        if rationale:
            args["rationale"] = rationale
        return ToolEvent(f"add_{kind}", args)


_CONSTRAINTS = (
    ("never restart {host} during business hours (08:00-18:00 CET)", "{host} during business"),
    ("all schema changes to {svc} need a second reviewer from the DBA rota", "{svc} need a second"),
    ("keep the error budget of {svc} above 20 percent this quarter", "error budget of {svc}"),
    ("no deploys to {svc} on Fridays after 15:00", "{svc} on Fridays"),
    ("customer data must never leave the eu-west-1 region", "eu-west-1 region"),
    ("page the on-call for {svc} before touching its feature flags", "flags"),
)
_DECISIONS = (
    ("roll back {svc} to v2.{minor}.3", "the canary showed a 4x error rate", "v2.{minor}.3"),
    (
        "move {svc} traffic off {host}",
        "its disk latency doubled since the kernel upgrade",
        "off {host}",
    ),
    (
        "raise the pool size of {svc} from 20 to 60",
        "connections were exhausted at peak",
        "from 20 to 60",
    ),
    (
        "freeze the {svc} release train until INC-{inc} is closed",
        "we cannot ship blind",
        "release train until INC-{inc}",
    ),
)
_CHATTER = (
    "any update on {svc}?",
    "restarting {host} now, will report back",
    "ok thanks",
    "dashboards for {svc} look calmer after the change",
    "who is on call for {svc} this week?",
    "I'll grab a coffee and look at the graphs again",
    "p99 latency on {svc} is back to 240ms",
    "the alert for {host} fired again, acking it",
    "can you summarise where we are with INC-{inc}?",
    "let's sync in 10 minutes in the incident channel",
)


def _log(rng: random.Random, host: str, lines: int, bad: str) -> str:
    out = []
    for i in range(lines):
        clock = f"{8 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        ts = f"2026-11-29T{clock}.{rng.randrange(1000):03d}Z"
        roll = rng.random()
        if roll < 0.06:
            out.append(f"{ts} ERROR [{host}] {bad} request_id={rng.getrandbits(64):016x}")
        elif roll < 0.12:
            out.append(
                f"{ts} WARN  [{host}] slow query took {rng.randrange(900, 5000)}ms "
                f"on pool {rng.randrange(8)}"
            )
        else:
            path = rng.choice(("/v1/charge", "/v1/refund", "/v1/status", "/healthz"))
            out.append(
                f"{ts} INFO  [{host}] {rng.choice(('GET', 'POST'))} {path} "
                f"{rng.choice((200, 200, 200, 201, 204))} {rng.randrange(3, 400)}ms "
                f"client=10.{rng.randrange(255)}.{rng.randrange(255)}.{rng.randrange(255)}"
            )
    return "\n".join(out)


def _pytest(rng: random.Random, failing: str, total: int) -> str:
    dots = "".join("." for _ in range(40))
    captured = "\n".join(
        f"INFO     payments.refund:refund.py:{rng.randrange(10, 200)} refund accepted "
        f"id={rng.getrandbits(48):012x}"
        for _ in range(30)
    )
    return f"""============================= test session starts ==============================
platform linux -- Python 3.12.7, pytest-8.3.3, pluggy-1.5.0
rootdir: /srv/payments
collected {total} items

tests/test_charge.py {dots}                                   [ 20%]
tests/test_refund.py ....F.......................                             [ 40%]
tests/test_ledger.py {dots}                                   [ 80%]

=================================== FAILURES ===================================
{"_" * 30} {failing} {"_" * 30}

    def {failing}(client, ledger):
        first = client.post("/v1/refund", json=REFUND)
        second = client.post("/v1/refund", json=REFUND)
>       assert second.status_code == 409
E       assert 201 == 409
E        +  where 201 = <Response [201]>.status_code

tests/test_refund.py:{rng.randrange(40, 300)}: AssertionError
----------------------------- Captured log call ------------------------------
{captured}
=========================== short test summary info ============================
FAILED tests/test_refund.py::{failing} - assert 201 == 409
================== 1 failed, {total - 1} passed, 4 warnings in 31.07s ==================="""


def _diff(rng: random.Random, path: str, symbol: str) -> str:
    body = []
    for i in range(rng.randrange(30, 70)):
        body.append(f"-    retries = {i}\n+    retries = {i + 1}  # {symbol}")
    return (
        f"diff --git a/{path} b/{path}\nindex 3f2a9c1..8b7d0e4 100644\n"
        f"--- a/{path}\n+++ b/{path}\n"
        f"@@ -{rng.randrange(10, 90)},7 +{rng.randrange(10, 90)},9 "
        f"@@ def {symbol}(self, request):\n" + "\n".join(body)
    )


def _mypy(rng: random.Random, code: str) -> str:
    lines = []
    for _ in range(rng.randrange(40, 90)):
        f = rng.choice(("payments/refund.py", "payments/charge.py", "payments/ledger.py"))
        lines.append(
            f'{f}:{rng.randrange(1, 400)}: error: Argument 1 to "post_entry" has incompatible '
            f'type "Decimal | None"; expected "Decimal"  [{code}]'
        )
        if rng.random() < 0.3:
            lines.append(f"{f}:{rng.randrange(1, 400)}: error: Missing return statement  [return]")
    lines.append(f"Found {len(lines)} errors in 3 files (checked 212 source files)")
    return "\n".join(lines)


def _trace(rng: random.Random, exc: str, message: str) -> str:
    frames = []
    for i in range(rng.randrange(12, 25)):
        mod = rng.choice(
            (
                "celery/app/trace.py",
                "billing/tasks.py",
                "billing/invoice.py",
                "sqlalchemy/engine/base.py",
            )
        )
        frames.append(
            f'  File "/srv/app/{mod}", line {rng.randrange(20, 900)}, in fn_{i}\n    call_{i}(arg)'
        )
    return "Traceback (most recent call last):\n" + "\n".join(frames) + f"\n{exc}: {message}"


def _grep(rng: random.Random, needle: str) -> str:
    out = []
    for _ in range(rng.randrange(60, 140)):
        f = rng.choice(("svc/config.py", "svc/pool.py", "deploy/values.yaml", "svc/client.py"))
        out.append(f"{f}:{rng.randrange(1, 500)}:    {needle} = settings.get('{needle}', 20)")
    return "\n".join(out)


def generate_thread(turns: int = 300, seed: int = 7) -> tuple[list[GeneratedTurn], list[Fact]]:
    """A thread of ``turns`` person messages, and the facts stated in it (with their turns)."""
    t = _Thread(seed)
    rng = t.rng
    lookbacks: list[tuple[Fact, str]] = []
    inc = t.incident
    words = [
        "idempotency",
        "partial",
        "currency",
        "rounding",
        "webhook",
        "chargeback",
        "settlement",
        "overdraft",
        "timezone",
        "dispute",
        "payout",
        "fx",
        "vat",
        "batch",
        "ledger",
        "receipt",
        "reversal",
        "escrow",
        "install",
        "mandate",
    ]
    rng.shuffle(words)
    topics = iter(words + [f"{w}_again" for w in words] * 20)

    def fill(text: str) -> str:
        return text.format(
            svc=rng.choice(_SERVICES), host=rng.choice(_HOSTS), inc=inc, minor=rng.randrange(10, 30)
        )

    while t.n <= turns:
        n = t.n
        phase = rng.random()
        if n == 1:
            t.say(
                f"INC-{inc}: payments-api is returning 502s for about 8% of charges since 09:40, "
                "can you help us work through it?",
                "On it. Let's collect the logs first.",
            )
        elif n <= 40 and phase < 0.35:
            # Constraints and decisions are stated early, as people do.
            stated = sum(f.kind in {"constraint", "decision"} for f in t.facts)
            if stated % 2 == 0:
                text, key = rng.choice(_CONSTRAINTS)
                svc, host = rng.choice(_SERVICES), rng.choice(_HOSTS)
                text, key = text.format(svc=svc, host=host), key.format(svc=svc, host=host)
                fact = t.fact("constraint", key)
                if rng.random() < 0.5:
                    t.say(f"constraint: {text}", "Noted as a constraint for this thread.")
                else:
                    t.say(
                        f"important, everyone: {text}. please keep that in mind",
                        "Recorded that as a constraint.",
                        [t.tool_item("constraint", text)],
                    )
                lookbacks.append((fact, f"remind me, what was the rule about {key.split()[0]}?"))
            else:
                text, why, key = rng.choice(_DECISIONS)
                values = {
                    "svc": rng.choice(_SERVICES),
                    "host": rng.choice(_HOSTS),
                    "inc": inc,
                    "minor": rng.randrange(10, 30),
                }
                text, key = text.format(**values), key.format(**values)
                fact = t.fact("decision", key)
                if rng.random() < 0.5:
                    t.say(f"decision: {text} because {why}", "Decision recorded.")
                else:
                    t.say(
                        f"ok we agreed: {text}, since {why}",
                        "Recorded the decision.",
                        [t.tool_item("decision", text, why)],
                    )
                lookbacks.append((fact, f"what did we decide about {values['svc']}?"))
        elif phase < 0.12:
            host = rng.choice(_HOSTS)
            bad = rng.choice(
                (
                    "upstream timed out (110: Connection timed out) while reading",
                    "connection pool exhausted after 30s",
                    "TLS handshake failed: certificate expired",
                )
            )
            t.say(
                f"here are the last logs from {host}:\n"
                + _log(rng, host, rng.randrange(300, 900), bad),
                f"The {host} log shows repeated errors: {bad.split(':')[0]}.",
            )
        elif phase < 0.20:
            topic = next(topics)
            failing = f"test_refund_{topic}_{n}"
            fact = t.fact("paste", failing)
            t.say(
                f"CI on the {topic} branch is red:\n"
                + _pytest(rng, failing, rng.randrange(150, 400)),
                "One failure: a double refund is accepted.",
            )
            lookbacks.append(
                (fact, f"what was the exact name of the {topic} test that failed in CI?")
            )
        elif phase < 0.26:
            symbol = f"retry_policy_{n}"
            t.say(
                "proposed patch for the retries:\n```diff\n"
                + _diff(rng, "payments/client.py", symbol)
                + "\n```",
                "The patch raises the retry counts in payments/client.py.",
            )
        elif phase < 0.31:
            code = rng.choice(("arg-type", "union-attr"))
            t.say(
                "mypy is unhappy with the branch:\n" + _mypy(rng, code),
                f"Mostly one {code} error repeated.",
            )
        elif phase < 0.36:
            exc = rng.choice(
                (
                    "billing.errors.InvoiceLockTimeout",
                    "sqlalchemy.exc.OperationalError",
                    "billing.errors.LedgerDrift",
                )
            )
            invoice = rng.randrange(10**5, 10**6)
            fact = t.fact("paste", f"{exc}: lock on invoice {invoice}")
            t.say(
                f"worker-7 crashed on invoice {invoice} with this:\n"
                + _trace(rng, exc, f"lock on invoice {invoice} not acquired"),
                "The worker died on a lock.",
            )
            lookbacks.append(
                (fact, f"which exception did worker-7 crash with on invoice {invoice}?")
            )
        elif phase < 0.40:
            needle = rng.choice(("POOL_SIZE", "MAX_RETRIES", "TIMEOUT_S"))
            t.say(
                f"grep for {needle}:\n" + _grep(rng, needle), f"{needle} is read in a few places."
            )
        elif phase < 0.48:
            host, svc = rng.choice(_HOSTS), rng.choice(_SERVICES)
            cause, question = rng.choice(
                (
                    (
                        f"the TLS certificate on {host} expired",
                        f"what did we find was wrong with the TLS certificate on {host}?",
                    ),
                    (
                        f"{svc} exhausted its connection pool on {host}",
                        f"what did we find about the connection pool of {svc}?",
                    ),
                    (
                        f"a kernel upgrade on {host} doubled the disk latency",
                        f"why was the disk latency on {host} so high, what did we find?",
                    ),
                )
            )
            fact = t.fact("finding", cause)
            if rng.random() < 0.5:
                t.say(f"root cause: {cause}", "That matches the logs.")
            else:
                t.say(f"found it, {cause}. adding a note", "Noted.", [t.tool_item("note", cause)])
            lookbacks.append((fact, question))
        elif phase < 0.62 and lookbacks and n > 60:
            fact, question = lookbacks.pop(rng.randrange(len(lookbacks)))
            turn = t.say(question, "Let me check the thread state.")
            turn.asks_about = fact
        else:
            t.say(fill(rng.choice(_CHATTER)), "Okay.")
    return t.turns, t.facts
