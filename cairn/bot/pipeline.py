"""What every frontend shares: the runtime, the queue, and accepting one ChatEvent.

A frontend builds a :class:`Pipeline` from the settings, hands each normalised event to
:meth:`Pipeline.accept`, and posts what :class:`~cairn.sessions.outbox.Outbox` holds for it.
"""

from __future__ import annotations

from dataclasses import replace

from cairn.bot.routing import route
from cairn.core import stages
from cairn.core.disk import check_room
from cairn.core.metrics import EVENTS
from cairn.core.secrets import warm as warm_gate
from cairn.core.settings import Settings
from cairn.memory.context.artifacts import ArtifactStore
from cairn.memory.context.intake import take_in
from cairn.memory.context.pastes import card_record, store_cards
from cairn.runtime import Runtime, build_runtime, reset_runtime
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission, Ingested, ingest
from cairn.sessions.log import EventLog, ThreadRef
from cairn.workers.dispatch import CeleryDispatcher, Dispatcher, InProcessDispatcher
from cairn.workers.upkeep import Ticker, start_in_process

__all__ = ["Pipeline"]


class Pipeline:
    """Ingest-and-enqueue for frontends, in-process or through Celery."""

    def __init__(self, rt: Runtime, dispatcher: Dispatcher) -> None:
        self.rt = rt
        self.dispatcher = dispatcher
        self.log = EventLog(rt.db)
        self.artifacts = ArtifactStore(rt.db)
        self._ticker: Ticker | None = None

    @classmethod
    def open(cls, settings: Settings) -> Pipeline:
        """Build the runtime and the queue from ``settings`` and re-queue work left pending.

        With a broker, workers do the memory work and this process does not open the vector
        store (the local Qdrant folder admits one process only).
        """
        rt = build_runtime(settings, index=not settings.broker_url)
        reset_runtime(rt)  # in-process tasks use this very runtime
        dispatcher: Dispatcher
        if settings.broker_url:
            dispatcher = CeleryDispatcher(settings.broker_url)
        else:
            dispatcher = InProcessDispatcher()
        pipeline = cls(rt, dispatcher)
        warm_gate()  # the first message does not load the detector
        pipeline.recover()
        if not settings.broker_url:
            # No celery beat without a broker: the same upkeep schedule runs on a thread here.
            pipeline._ticker = start_in_process(rt, dispatcher.submit)
        return pipeline

    def accept(self, event: ChatEvent) -> Ingested:
        """Validate, dedupe and log ``event``, then queue its session if there is work.

        A decision on a held tool call that is not taken (a person not allowed, a request
        expired or decided already) comes back REFUSED with the answer to show that person.
        Raises InvalidInput for a malformed event (nothing stored), DiskFull (an InvalidInput)
        when CAIRN_HOME has under CAIRN_MIN_FREE_MB free, and QueueError when the
        broker is unreachable (the event is stored and will be re-queued by :meth:`recover`).
        While the database is unavailable it raises the driver's error as it is (see
        :func:`cairn.db.is_unavailable`): the frontend keeps the event and tries again.
        """
        with stages.message("frontend"):
            # Nothing is acknowledged that cannot be stored (DiskFull, told in the thread).
            check_room(self.rt.settings.home_dir, self.rt.settings.min_free_mb)
            event = route(event, self.rt.settings)
            if event.type is EventType.MESSAGE and (
                event.attachments or len(event.text) > self.rt.settings.max_message_chars
            ):
                event = self._take_in(event)
            with stages.span("ingest"):
                result = ingest(
                    self.log,
                    event,
                    agent=event.agent or self.rt.settings.agent,
                    max_chars=self.rt.settings.max_message_chars,
                    settings=self.rt.settings,
                )
            EVENTS.labels(event.platform, event.type.value, result.admission.value).inc()
            queued = result.admission is Admission.QUEUED or (
                result.admission is Admission.REFUSED and result.event_row is not None
            )
            if queued and result.session_id is not None:
                with stages.span("enqueue"):
                    self.dispatcher.submit(result.session_id)
            return result

    def _take_in(self, event: ChatEvent) -> ChatEvent:
        """``event`` with its long pastes and attached files made artifact cards (stored now,
        for its session), or InvalidInput with the reason when they can't be."""
        settings = self.rt.settings
        intake = take_in(
            event.text,
            event.attachments,
            max_chars=settings.max_message_chars,
            max_bytes=settings.attachment_max_bytes,
            distill_chars=settings.context.distill_chars,
            images=settings.llm.model_images,
        )
        if intake.cards:
            ref = ThreadRef(event.platform, event.tenant, event.channel, event.thread)
            session = self.log.open_session(ref, event.agent or settings.agent)
            store_cards(self.artifacts, session.id or 0, event.tenant, intake.cards)
            for sha256, image in intake.images:
                self.artifacts.put_image(sha256, image)
        return replace(
            event,
            text=intake.text,
            attachments=(),
            artifacts=tuple(card_record(card) for card in intake.cards),
            attached_chars=intake.attached,
            secrets=intake.secrets,
            hidden=intake.hidden,
        )

    def recover(self) -> int:
        """Queue every session with pending events (after a crash or a broker outage)."""
        sessions = self.log.sessions_with_pending()
        for session_id in sessions:
            self.dispatcher.submit(session_id)
        return len(sessions)

    def close(self) -> None:
        """Let in-process work finish, then release connections."""
        if self._ticker is not None:
            self._ticker.stop()
        self.dispatcher.close()
        self.rt.close()
