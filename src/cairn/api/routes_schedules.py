"""Schedules of your groups' rooms: listed, added, removed and fired as `cairn schedule` does."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from cairn.api import visibility
from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import NAME, FiringView, ScheduleBody, ScheduleView

router = APIRouter(prefix="/api/schedules", tags=["schedules"])
ScheduleName = Annotated[str, Path(pattern=NAME, description="The schedule's name.")]
CHANGE = responses(401, 403, 404, 409, 422, 503)


@router.get("", response_model=list[ScheduleView], responses=responses(401, 503))
def list_schedules(served: ServedDep, user: UserDep) -> list[ScheduleView]:
    """The schedules of your groups' rooms, with their next and last fire times."""
    from cairn.jobs.schedules import schedule_views

    with served.store.begin() as conn:
        rooms = {room.name for room in visibility.visible_rooms(conn, user)}
        views = schedule_views(conn)
    return [ScheduleView.model_validate(v.to_data()) for v in views if v.room in rooms]


@router.post("", response_model=ScheduleView, status_code=201, responses=CHANGE)
def add_schedule(body: ScheduleBody, served: ServedDep, user: UserDep) -> ScheduleView:
    """Add a schedule; each firing submits one scheduled job with you as its requester."""
    from cairn.api.agent_choice import agent_spec
    from cairn.jobs import schedules

    cron = schedules.check_cron(body.cron)  # before anything else: the commonest mistake
    with served.store.begin() as conn:
        visibility.require_room(conn, user, body.room)
        made = schedules.add_schedule(
            conn,
            name=body.name,
            room=body.room,
            cron=cron,
            request=body.request,
            agent=agent_spec(conn, body.room, body.agent, body.script),
            actor=user.name,
            sanitizer=served.sanitizer(),
        )
        view = next(v for v in schedules.schedule_views(conn) if v.name == made.name)
    return ScheduleView.model_validate(view.to_data())


@router.delete("/{name}", status_code=204, responses=CHANGE)
def remove_schedule(name: ScheduleName, served: ServedDep, user: UserDep) -> None:
    """Remove a schedule (its requester or a group admin); the jobs it submitted stay."""
    from cairn.jobs.schedules import remove_schedule as remove

    with served.store.begin() as conn:
        remove(conn, name, actor=user.name)


@router.post("/{name}/fire", response_model=FiringView, status_code=201, responses=CHANGE)
def fire_schedule(name: ScheduleName, served: ServedDep, user: UserDep) -> FiringView:
    """Fire a schedule now (its requester or a group admin): its scheduled job is submitted."""
    from cairn.jobs.schedules import fire_now

    with served.store.begin() as conn:
        firing = fire_now(conn, name, served.sanitizer(), actor=user.name)
    assert firing.job_id is not None, "fire_now refuses a firing that made no job"
    return FiringView(job=firing.job_id, fire_at=firing.fire_at)
