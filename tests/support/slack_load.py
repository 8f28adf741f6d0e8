"""A steady stream of numbered Slack mentions posted to ``cairn run``, and what came of them.

Each mention is posted as Slack posts an Events API request: signed, given up on after 3 s, and
sent again with the same event id and ``X-Slack-Retry-Num`` when Cairn did not answer 2xx (on
Slack's schedule, compressed). What the bot posted back to the Slack stand-in is then counted
into :class:`Figures`: nothing acknowledged may go unanswered, be answered twice, or be answered
out of order within its thread.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field

from tests.support.slack_api import BOT_USER, SlackAPI, event_payload, signed_headers

__all__ = ["Figures", "SlackLoad"]

# Slack retries at once, after 1 minute and after 5 minutes; a bench cannot wait that long.
RETRY_DELAYS = (1.0, 5.0, 15.0)
# Slack gives up on a request that has no answer within 3 seconds, and retries it.
ACK_TIMEOUT = 3.0
CHANNEL = "C0BENCH"
_ANSWER = re.compile(r"^remembered: bench fact (\d+) ")


@dataclass(frozen=True, slots=True)
class Figures:
    """What came of a stream of mentions.

    ``lost`` counts mentions Cairn acknowledged (2xx) and never answered; ``duplicated`` those
    answered more than once; ``order_violations`` the answers posted after the answer to a
    mention of the same thread that Cairn acknowledged later.
    """

    sent: int
    answered: int
    lost: int
    duplicated: int
    order_violations: int
    unacknowledged: int

    def as_dict(self) -> dict[str, int]:
        """The figures by name, as the bench report prints them."""
        return asdict(self)


@dataclass
class _Mention:
    n: int
    thread_ts: str
    event_id: str
    outcomes: list[str] = field(default_factory=list)  # each attempt: a status, or why not
    acked: int | None = None  # its place in the order Cairn acknowledged mentions


class SlackLoad:
    """Posts mention ``n`` every ``interval`` seconds, round robin over ``threads`` threads.

    The text of mention ``n`` asks the bot to remember "bench fact n ...", so that its answer,
    the notice "remembered: bench fact n ...", names the mention it answers.
    """

    def __init__(
        self, slack: SlackAPI, port: int, signing_secret: str, *, threads: int = 4
    ) -> None:
        self.slack, self.port, self.secret = slack, port, signing_secret
        self.threads = [f"{1_700_002_000 + k}.000100" for k in range(threads)]
        self.mentions: list[_Mention] = []
        self._lock = threading.Lock()
        self._acks = 0
        self._stop = threading.Event()
        self._deliveries: list[threading.Thread] = []
        self._sender: threading.Thread | None = None

    def start(self, interval: float = 0.5) -> None:
        """Start posting, one new mention every ``interval`` seconds, until :meth:`stop`."""
        self._sender = threading.Thread(target=self._send, args=(interval,), daemon=True)
        self._sender.start()

    def stop(self) -> None:
        """Stop posting new mentions; returns once every retry has been made."""
        self._stop.set()
        if self._sender is not None:
            self._sender.join()
        for delivery in self._deliveries:
            delivery.join()

    def settle(self, timeout: float = 60.0, grace: float = 3.0) -> Figures:
        """Wait up to ``timeout`` seconds for every acknowledged mention to be answered, then
        ``grace`` seconds more for any second answer; the figures then."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.figures().lost:
            time.sleep(0.2)
        time.sleep(grace)
        return self.figures()

    def report(self) -> str:
        """Each mention that was not acknowledged or not answered once, with what happened; and
        what else the bot posted."""
        counts = Counter(n for n, _ in self._answers())
        odd = [m for m in self.mentions if m.acked is None or counts[m.n] != 1]
        others = [
            str(p.get("text"))[:80]
            for p in self.slack.posts(CHANNEL)
            if not _ANSWER.match(str(p.get("text") or ""))
        ]
        return "; ".join(
            [f"#{m.n}: {m.outcomes} answered {counts[m.n]}x" for m in odd]
            + [f"{len(others)} other posts, the first: {others[:3]}"]
        )

    def figures(self) -> Figures:
        """Count what the bot posted so far against what was sent and acknowledged."""
        answers = self._answers()
        counts = Counter(n for n, _ in answers)
        acked = {m.n: m.acked for m in self.mentions}
        violations = 0
        latest: dict[str, int] = {}
        for n, thread in dict.fromkeys(answers):  # first answers, in the order posted
            place = acked[n]
            if place is None:  # never acknowledged: Slack's own retry order is unknown
                continue
            if place < latest.get(thread, -1):
                violations += 1
            latest[thread] = max(place, latest.get(thread, -1))
        return Figures(
            sent=len(self.mentions),
            answered=len(counts),
            lost=sum(1 for m in self.mentions if m.acked is not None and m.n not in counts),
            duplicated=sum(1 for c in counts.values() if c > 1),
            order_violations=violations,
            unacknowledged=sum(1 for m in self.mentions if m.acked is None),
        )

    def _answers(self) -> list[tuple[int, str]]:
        """(mention number, thread) of each answer posted in its mention's thread, in order."""
        with self._lock:
            threads = {m.n: m.thread_ts for m in self.mentions}
        found = []
        for post in self.slack.posts(CHANNEL):
            match = _ANSWER.match(str(post.get("text") or ""))
            if match is None:
                continue
            n, thread = int(match.group(1)), str(post.get("thread_ts"))
            if threads.get(n) == thread:
                found.append((n, thread))
        return found

    def _send(self, interval: float) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            mention = _Mention(n, self.threads[n % len(self.threads)], f"EvBENCH{n:05d}")
            with self._lock:
                self.mentions.append(mention)
            delivery = threading.Thread(target=self._deliver, args=(mention,), daemon=True)
            self._deliveries.append(delivery)
            delivery.start()
            self._stop.wait(interval)

    def _deliver(self, mention: _Mention) -> None:
        ts = f"{1_700_003_000 + mention.n}.000100"
        event = {
            "type": "app_mention",
            "user": "UBENCH",
            "text": f"<@{BOT_USER}> remember bench fact {mention.n} for the fault bench",
            "ts": ts,
            "thread_ts": mention.thread_ts,
            "channel": CHANNEL,
            "event_ts": ts,
        }
        body = json.dumps(event_payload(event, event_id=mention.event_id)).encode()
        reason = ""
        for attempt, delay in enumerate((0.0, *RETRY_DELAYS)):
            time.sleep(delay)
            headers = signed_headers(self.secret, body)  # Slack signs each attempt anew
            if attempt:
                headers["X-Slack-Retry-Num"] = str(attempt)
                headers["X-Slack-Retry-Reason"] = reason
            outcome = self._post(body, headers)
            mention.outcomes.append(outcome)
            if outcome.startswith("2"):
                with self._lock:
                    mention.acked, self._acks = self._acks, self._acks + 1
                return
            reason = outcome if outcome in ("http_timeout", "connection_failed") else "http_error"

    def _post(self, body: bytes, headers: dict[str, str]) -> str:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/slack/events", data=body, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=ACK_TIMEOUT) as response:  # noqa: S310
                return str(response.status)
        except urllib.error.HTTPError as exc:
            return str(exc.code)
        except TimeoutError:
            return "http_timeout"
        except (urllib.error.URLError, OSError) as exc:
            timed_out = isinstance(getattr(exc, "reason", None), TimeoutError)
            return "http_timeout" if timed_out else "connection_failed"
