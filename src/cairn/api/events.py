"""Server-sent progress: `{job, stage, status, seq}` from the events ledger, and nothing else.

`seq` is the event's id, sent as the SSE `id`, so a client that reconnects with
`Last-Event-ID` gets every event after the last one it saw: first what is recorded already,
read for that stream, then what happens next, from the app's one poller (`event_hub`). Access
is re-checked when the stream opens and every few seconds while it lasts, so a member taken
out of the group stops receiving.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated

import anyio
import sqlalchemy as sa
from fastapi import APIRouter, Header, Path, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from cairn.api import visibility
from cairn.api.deps import Served, ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.event_hub import BATCH, Routed
from cairn.api.schemas import ProgressEvent
from cairn.errors import CairnError
from cairn.store.schema import events, jobs

router = APIRouter(prefix="/api", tags=["events"])
ACCESS_SECONDS = 5.0
"""How often a quiet stream re-checks that its user may still see what it carries."""
Id = Annotated[int, Path(ge=1, le=2**31 - 1)]
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=20)]
STREAM = {
    200: {
        "description": "An SSE stream; each message's data is a ProgressEvent, its id the seq.",
        "content": {"text/event-stream": {"schema": ProgressEvent.model_json_schema()}},
    },
    **responses(401, 403, 404, 422, 503),
}


@router.get("/jobs/{job_id}/events", response_class=EventSourceResponse, responses=STREAM)
def job_events(
    job_id: Id, request: Request, served: ServedDep, user: UserDep, last: LastEventId = None
) -> EventSourceResponse:
    """The job's progress as it happens, from after `Last-Event-ID` (else from its start)."""
    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)

    def check(conn: sa.Connection) -> None:
        visibility.require_job(conn, user, job_id)

    return _stream(
        request,
        served,
        events.c.job_id == job_id,
        check,
        _after(last),
        lambda r: r.event.job == job_id,
    )


@router.get("/rooms/{room_id}/events", response_class=EventSourceResponse, responses=STREAM)
def room_events(
    room_id: Id, request: Request, served: ServedDep, user: UserDep, last: LastEventId = None
) -> EventSourceResponse:
    """Progress of every job in the room, in the order it happened."""
    with served.store.begin() as conn:
        visibility.require_room(conn, user, room_id)
    in_room = events.c.job_id.in_(sa.select(jobs.c.id).where(jobs.c.room_id == room_id))

    def check(conn: sa.Connection) -> None:
        visibility.require_room(conn, user, room_id)

    return _stream(request, served, in_room, check, _after(last), lambda r: r.room == room_id)


def _after(last: str | None) -> int:
    """The seq to resume after; a header that is not one starts from the beginning."""
    text = (last or "").strip()
    return int(text) if text.isdigit() and len(text) <= 18 else 0


def _stream(
    request: Request,
    served: Served,
    where: sa.ColumnElement[bool],
    check: Callable[[sa.Connection], None],
    after: int,
    wants: Callable[[Routed], bool],
) -> EventSourceResponse:
    def backlog(seq: int) -> list[ProgressEvent] | None:
        """Events after `seq` already recorded, or None once the user may no longer see them."""
        with served.store.begin() as conn:
            try:
                check(conn)
            except CairnError:
                return None
            query = (
                sa.select(events.c.id, events.c.job_id, events.c.stage, events.c.status)
                .where(where & (events.c.id > seq))
                .order_by(events.c.id)
                .limit(BATCH)
            )
            rows = conn.execute(query).all()
        return [ProgressEvent(job=r.job_id, stage=r.stage, status=r.status, seq=r.id) for r in rows]

    def allowed() -> bool:
        with served.store.begin() as conn:
            try:
                check(conn)
            except CairnError:
                return False
        return True

    async def messages() -> AsyncIterator[ServerSentEvent]:
        hub = served.hub
        # Subscribed before the backlog is read: an event recorded in between is in one or
        # both, and `seq` drops the second copy.
        subscription = await hub.subscribe(wants)
        try:
            seq = after
            while True:
                found = await anyio.to_thread.run_sync(backlog, seq)
                if found is None:
                    return
                for recorded in found:
                    seq = recorded.seq
                    yield _message(recorded)
                if len(found) < BATCH:
                    break
            while not await request.is_disconnected():
                try:
                    event: ProgressEvent | None = await asyncio.wait_for(
                        subscription.queue.get(), ACCESS_SECONDS
                    )
                except TimeoutError:
                    # Access is re-checked while nothing happens too: a member taken out of
                    # the group stops receiving.
                    if not await anyio.to_thread.run_sync(allowed):
                        return
                    continue
                if event is None:
                    return  # fell too far behind: the client reconnects with Last-Event-ID
                if event.seq > seq:
                    seq = event.seq
                    yield _message(event)
        finally:
            hub.unsubscribe(subscription)

    return EventSourceResponse(messages(), ping=15)


def _message(event: ProgressEvent) -> ServerSentEvent:
    return ServerSentEvent(data=event.model_dump_json(), id=str(event.seq))
