"""``cairn bench feedback``: does the team's feedback keep bad memories out of the top 5?

A simulated team teaches the bot known good and known bad memories, then asks about them over
many sessions. Everything runs through the real parts on a scratch runtime (SQLite and the
embedded vector index in a temporary folder, the offline model): each memory is taught and
each question asked through ingest and the worker's turn, and each reaction goes through
ingest and the feedback path. People judge what they read: a reply that repeats a bad memory
gets a thumbs down, one that answers the question with a good memory and nothing bad a thumbs
up; outdated memories are retracted by their author with a cross on the "remembered" notice.

Figures: the share of bad memories among the top 5 of every topic's question before and after
the sessions, how often a retracted memory appeared in a top 5 afterwards (must be 0), and the
most negative reactions any bad memory took before it left every top 5 for good (target: 2).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import click
from sqlmodel import col, select

from cairn.bench.scratch import handled, scratch_runtime
from cairn.db.models import MemoryUse, OutboundMessage
from cairn.memory import Scope
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent, EventType

__all__ = ["TOPICS", "FeedbackFigures", "Topic", "feedback_command", "run_feedback"]

TENANT = "bench"
CHANNEL = "C-bench"
PEOPLE = ("ann", "bob", "cat", "dan")
K = 5


@dataclass(frozen=True, slots=True)
class Topic:
    """What people ask about (``key``), and the one memory the team taught about it."""

    key: str
    memory: str
    quality: str  # good | bad (wrong, people react -1) | outdated (its author retracts it)


TOPICS: tuple[Topic, ...] = (
    Topic("the VPN gateway", "The VPN gateway is vpn-gw-2.acme.test", "good"),
    Topic("the staging database", "The staging database is db-stg-1 on port 5433", "good"),
    Topic("the on-call phone", "The on-call phone is in the top drawer of desk 12", "good"),
    Topic("the release train", "The release train leaves every Thursday at 14:00", "good"),
    Topic("database backups", "Database backups run nightly at 02:00 UTC", "good"),
    Topic("the team wiki", "The team wiki lives at wiki.acme.test", "good"),
    Topic("the CI runners", "CI builds run on the runner-7 pool", "good"),
    Topic("incident handling", "Incident handling happens in the #inc-war-room channel", "good"),
    Topic("code review rules", "Code review rules: two approvals before merging", "good"),
    Topic("log retention", "Log retention is 30 days in Loki", "good"),
    Topic("pager escalation", "Pager escalation goes straight to the CTO at night", "bad"),
    Topic("Friday deploys", "Friday deploys to production need no approval", "bad"),
    Topic("SSH keys", "SSH keys may be pasted into the team chat", "bad"),
    Topic("service passwords", "Service passwords never need rotating", "bad"),
    Topic("the load balancer", "The load balancer may be restarted any time without notice", "bad"),
    Topic("the metrics dashboard", "The metrics dashboard is grafana-old.acme.test", "outdated"),
    Topic("cost reports", "Cost reports are due on the first Monday of the month", "outdated"),
)


# The rest of what the team knows: good memories nobody asks about in the simulation, which
# fill the top 5 around the answer as a real store's many memories do.
_SERVICES = (
    "billing",
    "search",
    "checkout",
    "inventory",
    "shipping",
    "auth",
    "reporting",
    "mailer",
    "images",
    "payments",
    "catalog",
    "pricing",
    "reviews",
    "notifications",
    "exports",
)
_OWNERS = ("Priya", "Tomas", "Mei", "Jonas", "Aisha", "Lars")
_REGIONS = ("eu-west-1", "us-east-2", "ap-south-1")
FILLERS: tuple[str, ...] = tuple(
    f"The {service} service is owned by {_OWNERS[i % len(_OWNERS)]} and runs in "
    f"{_REGIONS[i % len(_REGIONS)]}"
    for i, service in enumerate(_SERVICES)
) + tuple(
    f"{_OWNERS[i % len(_OWNERS)]} reviews changes to the {service} schema on "
    f"{('Mondays', 'Wednesdays', 'Fridays')[i % 3]}"
    for i, service in enumerate(_SERVICES)
)


@dataclass
class FeedbackFigures:
    """What ``cairn bench feedback --json`` prints, and the details the table shows."""

    bad_in_top5_before: float
    bad_in_top5_after: float
    retracted_in_top5: int
    max_negative_reactions_to_drop: int
    details: dict[str, object] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        """Exactly the four figures of the issue."""
        return {k: v for k, v in asdict(self).items() if k != "details"}


class _Team:
    """The simulated people, talking to the bot through ingest and the worker."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.reactions = 0
        self._events = 0

    def say(self, user: str, thread: str, text: str) -> list[OutboundMessage]:
        """``user`` writes ``text`` in ``thread``; what the bot posted, delivered."""
        self._events += 1
        event = ChatEvent(
            "bench",
            TENANT,
            CHANNEL,
            thread,
            user,
            text=text,
            event_id=f"m{self._events}",
            private=False,  # a public channel: the bench reads the workspace's memory
        )
        result = handled(self.rt, event)
        with self.rt.db.session() as s:
            posted = s.exec(
                select(OutboundMessage)
                .where(OutboundMessage.cause_event_id == result.event_row)
                .order_by(col(OutboundMessage.id))
            ).all()
            for row in posted:  # delivered, as a frontend would record it
                row.status, row.message_ref = "sent", f"bench-{row.id}"
                s.add(row)
            return list(posted)

    def react(self, user: str, message: OutboundMessage, emoji: str) -> None:
        """``user`` reacts with ``emoji`` on ``message``, through ingest and the feedback path."""
        self._events += 1
        event = ChatEvent(
            "bench",
            TENANT,
            CHANNEL,
            message.thread_ref,
            user,
            type=EventType.REACTION_ADDED,
            reaction=emoji,
            target_id=f"bench-{message.id}",
            event_id=f"r{self._events}",
            private=False,
        )
        handled(self.rt, event)
        self.reactions += 1

    def used(self, message: OutboundMessage) -> set[int]:
        """The memories a bot message showed or used (what a reaction on it acts on)."""
        with self.rt.db.session() as s:
            rows = s.exec(select(MemoryUse).where(MemoryUse.outbound_id == message.id)).all()
            return {u.memory_id for u in rows}


def _question(topic: Topic) -> str:
    return f"what do you know about {topic.key}?"


def run_feedback(
    sessions: int, seed: int, *, progress: Callable[[str], None] | None = None
) -> FeedbackFigures:
    """Simulate ``sessions`` questions of a team with feedback; the figures (see module doc)."""
    rng = random.Random(seed)
    with scratch_runtime("feedback") as rt:
        team = _Team(rt)
        scope = Scope(TENANT, rt.settings.agent)
        ids: dict[int, Topic] = {}
        notices: dict[int, tuple[str, OutboundMessage]] = {}
        for n, topic in enumerate(TOPICS):
            author = rng.choice(PEOPLE)
            posted = team.say(author, f"teach-{n}", f"remember {topic.memory}")
            notice = next(m for m in posted if m.kind == "notice")
            (memory_id,) = team.used(notice)
            ids[memory_id] = topic
            notices[memory_id] = (author, notice)
        for n, text in enumerate(FILLERS):
            team.say(rng.choice(PEOPLE), f"background-{n}", f"remember {text}")
        bad = {m for m, t in ids.items() if t.quality != "good"}
        outdated = [m for m, t in ids.items() if t.quality == "outdated"]
        window = range(max(len(outdated), sessions // 3))
        retract_at = dict(zip(rng.sample(window, len(outdated)), outdated, strict=True))

        def top5() -> list[list[int]]:
            # Both what people ask and what the agent's recall tool searches for.
            return [
                [r.memory.id for r in rt.memory.recall(query, scope, K, touch=False)]
                for t in TOPICS
                for query in (_question(t), t.key)
            ]

        def bad_share(lists: list[list[int]]) -> float:
            slots = sum(len(ranked) for ranked in lists)
            return sum(1 for ranked in lists for m in ranked if m in bad) / max(1, slots)

        before = bad_share(top5())
        retracted: set[int] = set()
        retracted_seen = 0
        negatives = dict.fromkeys(bad, 0)
        dropped_at: dict[int, int] = {}  # bad memory -> negatives it had taken when it left
        reactions_until_clean: int | None = None
        topics = list(TOPICS)
        for n in range(sessions):
            if n in retract_at:
                memory_id = retract_at[n]
                author, notice = notices[memory_id]
                team.react(author, notice, "x")  # the author: a retraction, not a dispute
                retracted.add(memory_id)
            topic = rng.choice(topics)
            asker = rng.choice(PEOPLE)
            posted = team.say(asker, f"session-{n}", _question(topic))
            reply = next(m for m in posted if m.kind == "reply")
            used = team.used(reply)
            wanted = next(m for m, t in ids.items() if t is topic)
            if used & bad:
                team.react(asker, reply, "-1")
                for memory_id in used & bad:
                    negatives[memory_id] += 1
            elif wanted in used and wanted not in bad:
                team.react(asker, reply, "+1")
            lists = top5()
            shown = {m for ranked in lists for m in ranked}
            retracted_seen += len(shown & retracted)
            for memory_id in bad:
                if memory_id in shown:
                    dropped_at.pop(memory_id, None)  # back in: it has not left for good
                elif memory_id not in dropped_at:
                    dropped_at[memory_id] = negatives[memory_id]
            if reactions_until_clean is None and not shown & bad:
                reactions_until_clean = team.reactions
            if progress is not None and (n + 1) % 10 == 0:
                progress(f"{n + 1}/{sessions} sessions, {team.reactions} reactions")
        final = top5()
        after = bad_share(final)
        answered = [
            m
            for n, (m, t) in enumerate(ids.items())
            if t.quality == "good" and m in final[2 * n] and m in final[2 * n + 1]
        ]
        # A bad memory still in some top 5 at the end has not been dropped: count one more
        # reaction than it took, so the figure can only fail the target, never flatter it.
        worst = max(
            (dropped_at.get(m, negatives[m] + 1) for m in bad if m not in retracted), default=0
        )
        return FeedbackFigures(
            bad_in_top5_before=round(before, 4),
            bad_in_top5_after=round(after, 4),
            retracted_in_top5=retracted_seen,
            max_negative_reactions_to_drop=worst,
            details={
                "sessions": sessions,
                "seed": seed,
                "memories": len(ids) + len(FILLERS),
                "bad_memories": len(bad),
                "retracted": len(retracted),
                "reactions": team.reactions,
                "reactions_until_no_bad_in_top5": reactions_until_clean,
                "good_answered_after": round(
                    len(answered) / max(1, sum(t.quality == "good" for t in TOPICS)), 4
                ),
                "still_in_top5": sorted(m for m in bad if m not in dropped_at),
                "negatives": {ids[m].key: negatives[m] for m in sorted(bad)},
            },
        )


@click.command("feedback")
@click.option("--sessions", default=120, show_default=True, type=click.IntRange(1, 100_000),
              help="Questions the team asks.")  # fmt: skip
@click.option("--seed", default=7, show_default=True, type=click.IntRange(0, 2**32 - 1),
              help="Seed of the simulation.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the four figures as JSON.")
def feedback_command(sessions: int, seed: int, as_json: bool) -> None:
    """Simulate a team reacting to answers; bad memories in the top 5 before and after.

    \b
    Known good and bad memories are taught and asked about through the real turn; people
    thumb down replies that repeat a bad memory, thumb up good answers, and retract outdated
    memories. Uses a scratch store, never CAIRN_HOME's data; the ranking weights come from
    the settings (CAIRN_MEMORY_WEIGHT_*). Targets: no retracted memory in any top 5, and bad
    memories out of the top 5 after at most two negative reactions each.
    Example:
      cairn bench feedback --sessions 200 --seed 3 --json
    """
    from cairn.commands.common import cli_errors

    with cli_errors():
        if sessions < 1:
            raise click.BadParameter("must be at least 1", param_hint="--sessions")
        figures = run_feedback(
            sessions, seed, progress=None if as_json else lambda line: click.echo(line, err=True)
        )
        if as_json:
            click.echo(json.dumps(figures.as_json()))
            return
        d = figures.details
        click.echo(
            f"{d['memories']} memories ({d['bad_memories']} bad), {sessions} sessions, "
            f"{d['reactions']} reactions"
        )
        click.echo(f"bad memories in the top 5, before feedback: {figures.bad_in_top5_before:.1%}")
        click.echo(f"bad memories in the top 5, after feedback:  {figures.bad_in_top5_after:.1%}")
        click.echo(f"retracted memories seen in a top 5:         {figures.retracted_in_top5}")
        click.echo(f"good answers still in their top 5 after:    {d['good_answered_after']:.1%}")
        click.echo(
            "most negative reactions a bad memory took before it left: "
            f"{figures.max_negative_reactions_to_drop}"
        )
        click.echo(
            f"reactions until no bad memory was in any top 5: {d['reactions_until_no_bad_in_top5']}"
        )
