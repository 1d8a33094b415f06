"""Server-sent progress: `{job, stage, status, seq}` from the events ledger, and nothing else.

`seq` is the event's id, sent as the SSE `id`, so a client that reconnects with
`Last-Event-ID` gets every event after the last one it saw. The streams poll the store (the
core is synchronous; each poll runs in a worker thread) and re-check access on every poll, so
a member taken out of the group stops receiving.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated

import anyio
import sqlalchemy as sa
from fastapi import APIRouter, Header, Path, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from cairn.api import visibility
from cairn.api.deps import Served, ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import ProgressEvent
from cairn.errors import CairnError
from cairn.store.schema import events, jobs

router = APIRouter(prefix="/api", tags=["events"])
POLL_SECONDS = 0.2
BATCH = 500
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

    return _stream(request, served, events.c.job_id == job_id, check, _after(last))


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

    return _stream(request, served, in_room, check, _after(last))


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
) -> EventSourceResponse:
    def fetch(seq: int) -> list[ProgressEvent] | None:
        """Events after `seq`, or None once the user may no longer see them."""
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

    async def messages() -> AsyncIterator[ServerSentEvent]:
        seq = after
        while not await request.is_disconnected():
            found = await anyio.to_thread.run_sync(fetch, seq)
            if found is None:
                return
            for event in found:
                seq = event.seq
                yield ServerSentEvent(data=event.model_dump_json(), id=str(event.seq))
            if len(found) < BATCH:
                await anyio.sleep(POLL_SECONDS)

    return EventSourceResponse(messages(), ping=15)
