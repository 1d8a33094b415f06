"""One poller for every SSE stream of an app: the events ledger is read once, then fanned out.

A stream per subscriber polling the store would cost one query per subscriber per poll (a
thousand watchers of a room: five thousand queries a second, each in a worker thread the plain
routes need too). The hub instead reads the events after the last one it saw, once per poll
for everyone, and hands each new event to the subscribers whose job or room it belongs to.
Its poller runs while there is a subscriber and stops with the last one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import sqlalchemy as sa

from cairn.api.schemas import ProgressEvent
from cairn.store import Store
from cairn.store.schema import events, jobs

POLL_SECONDS = 0.2
BATCH = 500
QUEUE_LIMIT = 10_000
"""Events a subscriber may fall behind by; one slower than that is dropped (it reconnects)."""
_log = logging.getLogger("cairn.api")


@dataclass(frozen=True)
class Routed:
    """An event and the room of its job, so that room streams can be matched too."""

    event: ProgressEvent
    room: int


@dataclass(eq=False)
class Subscription:
    """One stream's interest: which events it wants, and where they wait for it."""

    wants: Callable[[Routed], bool]
    queue: asyncio.Queue[ProgressEvent | None] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_LIMIT)
    )


class EventHub:
    """Fans the events ledger out to subscriptions, from one poller per app."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.subscriptions: set[Subscription] = set()
        self.cursor: int | None = None
        self.poller: asyncio.Task[None] | None = None

    async def subscribe(self, wants: Callable[[Routed], bool]) -> Subscription:
        """Start receiving the events `wants` accepts that are recorded from now on.

        The poller's starting point is read before the subscription is returned: read later,
        an event recorded between the caller's backlog read and that point would reach no one.
        """
        if self.cursor is None:
            newest = await anyio.to_thread.run_sync(self._newest)
            if self.cursor is None:  # another subscriber may have set it meanwhile
                self.cursor = newest
        made = Subscription(wants)
        self.subscriptions.add(made)
        if self.poller is None or self.poller.done():
            self.poller = asyncio.get_running_loop().create_task(self._poll())
        return made

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop delivering to `subscription` (the poller ends with the last one)."""
        self.subscriptions.discard(subscription)

    async def _poll(self) -> None:
        while self.subscriptions:
            cursor = self.cursor or 0
            try:
                found = await anyio.to_thread.run_sync(self._after, cursor)
            except Exception:
                # The store may be briefly unavailable; the streams wait, then it is read again.
                _log.warning("could not read the events ledger; retrying", exc_info=True)
                found = []
            for routed in found:
                self.cursor = routed.event.seq
                self._deliver(routed)
            if len(found) < BATCH:
                await asyncio.sleep(POLL_SECONDS)

    def _deliver(self, routed: Routed) -> None:
        for subscription in list(self.subscriptions):
            if not subscription.wants(routed):
                continue
            try:
                subscription.queue.put_nowait(routed.event)
            except asyncio.QueueFull:
                # Too far behind: ended, so that its client reconnects with Last-Event-ID.
                self.subscriptions.discard(subscription)
                subscription.queue.get_nowait()
                subscription.queue.put_nowait(None)

    def _newest(self) -> int:
        with self.store.begin() as conn:
            return int(
                conn.execute(sa.select(sa.func.coalesce(sa.func.max(events.c.id), 0))).scalar_one()
            )

    def _after(self, seq: int) -> list[Routed]:
        query = (
            sa.select(events.c.id, events.c.job_id, events.c.stage, events.c.status, jobs.c.room_id)
            .join(jobs, jobs.c.id == events.c.job_id)
            .where(events.c.id > seq)
            .order_by(events.c.id)
            .limit(BATCH)
        )
        with self.store.begin() as conn:
            rows = conn.execute(query).all()
        return [
            Routed(ProgressEvent(job=r.job_id, stage=r.stage, status=r.status, seq=r.id), r.room_id)
            for r in rows
        ]
