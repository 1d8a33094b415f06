"""Schedules: standing requests that submit one scheduled job per fire time.

A schedule's cron expression is read in UTC at minute resolution. A runner that finds a
schedule due fires it once, for the latest fire time that has passed: fire times missed
while no runner ran are not a backlog, they are one firing, recorded with that latest time.
However many runners find it due, the firings ledger lets one of them submit the job.

The requester (`--as`) is checked when the schedule is added and again at every firing: a
requester who lost access gets no job, and the firing records why. Removing a schedule or
firing it by hand is for its requester or an admin of its room's group.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from cairn.errors import CairnError, NotAllowed, NotFound, UsageError
from cairn.jobs.submit import REQUEST_LIMIT, submit_job
from cairn.sanitize import Sanitizer, secret_spans, strip_control
from cairn.store import Store
from cairn.store import schedules as ledger
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Firing, FiringOutcome, FiringTrigger, Role, Schedule
from cairn.store.rooms import get_room
from cairn.store.schema import utcnow

CRON_EXAMPLE = '"0 3 * * 1" (Mondays at 03:00 UTC) or "*/30 * * * *" (every half hour)'
CRON_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
NOTE_LIMIT = 500
SCHEDULED = "scheduled"
_log = logging.getLogger("cairn.runner")


def check_cron(expression: str) -> str:
    """The expression in its stored form (fields single-spaced); a UsageError saying why not."""
    # Only the commands that use schedules load croniter (`cairn --help` stays quick).
    from croniter import CroniterBadDateError, CroniterError, croniter

    cron = " ".join(strip_control(expression).split())
    fields = cron.split(" ") if cron else []
    if cron.lower() in CRON_ALIASES:
        return cron.lower()
    if len(fields) != 5:
        raise UsageError(
            f"a cron expression has five fields (minute hour day-of-month month day-of-week), "
            f"not {len(fields)}; for example {CRON_EXAMPLE}"
        )
    try:
        croniter(cron, utcnow())
    except (CroniterError, ValueError) as exc:
        raise UsageError(
            f"the cron expression {cron!r} is not valid: {_cron_problem(exc)}; "
            f"for example {CRON_EXAMPLE}"
        ) from None
    try:
        next_fire_time(cron, utcnow())
        latest_fire_time(cron, utcnow())
    except CroniterBadDateError:
        raise UsageError(
            f"the cron expression {cron!r} names no date that exists (such as February 30); "
            f"for example {CRON_EXAMPLE}"
        ) from None
    return cron


def latest_fire_time(cron: str, now: datetime) -> datetime:
    """The latest time at or before `now` that `cron` names."""
    from croniter import croniter

    # Cron names whole minutes: the latest one up to the end of this minute is at most now.
    after = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    found: datetime = croniter(cron, after).get_prev(datetime)
    return found


def next_fire_time(cron: str, now: datetime) -> datetime:
    """The first time after `now` that `cron` names."""
    from croniter import croniter

    found: datetime = croniter(cron, now).get_next(datetime)
    return found


def add_schedule(
    conn: sa.Connection,
    *,
    name: str,
    room: str,
    cron: str,
    request: str,
    agent: dict[str, Any],
    actor: str,
    sanitizer: Sanitizer,
    now: datetime | None = None,
) -> Schedule:
    """Record a schedule after the checks a submit makes; it first fires after `now`."""
    stored_cron = check_cron(cron)
    text = _checked_request(request)
    found = get_room(conn, room)
    # The same membership check submit makes, now; every firing makes it again.
    requester = get_user(conn, actor)
    denied = _denied(conn, found.group_id, requester.id, requester.name)
    if denied:
        raise NotAllowed(denied)
    return ledger.add(
        conn,
        name=name,
        room_id=found.id,
        cron=stored_cron,
        request=sanitizer.clean(text, REQUEST_LIMIT),
        agent=agent,
        requester_id=requester.id,
        created_at=now,
    )


def remove_schedule(conn: sa.Connection, name: str, *, actor: str) -> Schedule:
    """Remove a schedule (its requester or a group admin); the jobs it submitted stay."""
    _require_requester_or_admin(conn, ledger.get(conn, name), actor, "remove")
    return ledger.remove(conn, name)


def due_fire_time(conn: sa.Connection, schedule: Schedule, now: datetime) -> datetime | None:
    """The fire time the schedule is due for at `now`, or None when it is not due.

    Only cron firings count as having fired a cron time: a manual fire just after one (the
    runner not having polled yet) is an extra run, and the cron time still gets its own.
    """
    latest = latest_fire_time(schedule.cron, now)
    last = ledger.last_firing(conn, schedule.id, FiringTrigger.cron)
    since = max(schedule.created_at, last.fire_at) if last else schedule.created_at
    return latest if latest > since else None


def fire(
    conn: sa.Connection,
    schedule: Schedule,
    fire_at: datetime,
    trigger: FiringTrigger,
    sanitizer: Sanitizer,
) -> Firing | None:
    """Fire `schedule` for `fire_at` in the caller's transaction: one job, or why none.

    None when this fire time was already fired (by another runner): nothing is created.
    """
    firing = ledger.claim_firing(conn, schedule.id, fire_at, trigger)
    if firing is None:
        return None
    room = get_room(conn, schedule.room_id)
    requester = get_user(conn, schedule.requester_id)
    denied = _denied(conn, room.group_id, requester.id, requester.name)
    if denied:
        note = sanitizer.clean(f"no job was submitted: {denied}", NOTE_LIMIT)
        return ledger.settle_firing(conn, firing.id, FiringOutcome.skipped, note=note)
    try:
        # A savepoint: a submit refused part-way leaves no half-made job beside the firing.
        with conn.begin_nested():
            job = submit_job(
                conn,
                room=room.name,
                text=schedule.request,
                agent=schedule.agent,
                actor=requester.name,
                sanitizer=sanitizer,
                kind=SCHEDULED,
            )
    except CairnError as refused:
        # Recorded, not raised: a runner would otherwise meet the same refusal on every poll.
        note = sanitizer.clean(f"no job was submitted: {refused}", NOTE_LIMIT)
        return ledger.settle_firing(conn, firing.id, FiringOutcome.skipped, note=note)
    return ledger.settle_firing(conn, firing.id, FiringOutcome.created, job_id=job.id)


def fire_now(
    conn: sa.Connection,
    name: str,
    sanitizer: Sanitizer,
    now: datetime | None = None,
    *,
    actor: str,
) -> Firing:
    """Fire the schedule `name` at once (`cairn schedule fire`), recorded at the time now.

    Only its requester or an admin of its room's group may (NotAllowed otherwise); the job
    is still submitted as the requester. A firing that would make no job is refused instead
    (NotAllowed, saying why), and the caller's transaction, rolled back, records nothing:
    the person asking is told directly.
    """
    # Locked, like a runner's firing: a remove under way finishes first, or waits for this.
    schedule = ledger.get(conn, name)
    if ledger.find(conn, schedule.id, lock=True) is None:
        raise NotFound(f"schedule {name!r} was removed just now; list the schedules")
    _require_requester_or_admin(conn, schedule, actor, "fire")
    firing = fire(conn, schedule, now or utcnow(), FiringTrigger.manual, sanitizer)
    if firing is None:
        raise UsageError(f"schedule {name!r} was fired at this very moment already; try again")
    if firing.job_id is None:
        raise NotAllowed(firing.note or "the schedule fired but no job was submitted")
    return firing


def fire_due(store: Store, sanitizer: Sanitizer, now: datetime | None = None) -> list[Firing]:
    """Fire every schedule due at `now`, each in its own transaction; the firings this made.

    A schedule another runner fired first, or removed since the list was read, is passed
    over quietly; one whose cron no longer reads (a row no cairn wrote) is logged, saying
    why, and left for a person to fix (`schedule list` shows it too).
    """
    at = now or utcnow()
    with store.read() as conn:
        every = ledger.list_schedules(conn)
    made = []
    for schedule in every:
        try:
            firing = _fire_if_due(store, schedule, at, sanitizer)
        except UsageError as broken:
            _log.warning("schedule %s cannot fire: %s", schedule.name, broken)
            continue
        except Exception:
            # One schedule that cannot fire (a row no cairn wrote) must not hold up the others.
            _log.exception("schedule %s could not fire; trying again later", schedule.name)
            continue
        if firing is not None:
            made.append(firing)
    return made


def _fire_if_due(
    store: Store, schedule: Schedule, at: datetime, sanitizer: Sanitizer
) -> Firing | None:
    """Fire the schedule if due, read again (and locked) in this transaction.

    A UsageError when its stored cron no longer reads, saying why.
    """
    with store.begin() as conn:
        current = ledger.find(conn, schedule.id, lock=True)
        if current is None:
            _log.info("schedule %s was removed before it fired; passed over", schedule.name)
            return None
        _stored_cron_problem(current)
        fire_at = due_fire_time(conn, current, at)
        if fire_at is None:
            return None
        firing = fire(conn, current, fire_at, FiringTrigger.cron, sanitizer)
    if firing is None:
        _log.debug("schedule %s at %s was fired by another runner", schedule.name, fire_at)
    return firing


def _stored_cron_problem(schedule: Schedule) -> None:
    """Raise a UsageError naming the schedule when its stored cron is not one cairn takes."""
    try:
        check_cron(schedule.cron)
    except UsageError as exc:
        raise UsageError(
            f"{exc}. It was stored outside cairn and does not fire until the schedule is "
            "removed and added again with a valid --cron"
        ) from None


@dataclass(frozen=True)
class ScheduleView:
    """One schedule as `cairn schedule list` shows it."""

    name: str
    room: str
    cron: str
    request: str
    agent: str
    requester: str
    next_fire_at: datetime | None
    """None when the stored cron does not read (`problem` says why)."""
    last_fire_at: datetime | None
    last_job: int | None
    last_outcome: str | None
    last_note: str | None
    problem: str | None = None

    def to_data(self) -> dict[str, Any]:
        """The JSON form of `schedule list --json`."""
        return {
            "name": self.name,
            "room": self.room,
            "cron": self.cron,
            "request": self.request,
            "agent": self.agent,
            "requester": self.requester,
            "next_fire_at": self.next_fire_at.isoformat() if self.next_fire_at else None,
            "last_fire_at": self.last_fire_at.isoformat() if self.last_fire_at else None,
            "last_job": self.last_job,
            "last_outcome": self.last_outcome,
            "last_note": self.last_note,
            "problem": self.problem,
        }


def schedule_views(conn: sa.Connection, now: datetime | None = None) -> list[ScheduleView]:
    """Every schedule with its next and last fire times and what its last firing came to."""
    at = now or utcnow()
    views = []
    for schedule in ledger.list_schedules(conn):
        last = ledger.last_firing(conn, schedule.id)
        next_at: datetime | None = None
        problem = None
        try:
            _stored_cron_problem(schedule)
            next_at = next_fire_time(schedule.cron, max(at, schedule.created_at))
        except UsageError as exc:
            problem = str(exc)
        views.append(
            ScheduleView(
                name=schedule.name,
                room=get_room(conn, schedule.room_id).name,
                cron=schedule.cron,
                request=schedule.request,
                agent=str(schedule.agent.get("adapter", "")),
                requester=get_user(conn, schedule.requester_id).name,
                next_fire_at=next_at,
                last_fire_at=last.fire_at if last else None,
                last_job=last.job_id if last else None,
                last_outcome=last.outcome.value if last else None,
                last_note=last.note if last else None,
                problem=problem,
            )
        )
    return views


def _denied(conn: sa.Connection, group_id: int, user_id: int, user_name: str) -> str | None:
    """Why this requester may not submit to the group's rooms, or None when they may."""
    group = get_group(conn, group_id)
    if membership(conn, group.id, user_id) is None:
        return (
            f"the requester {user_name} is not a member of group {group.name}, which owns the "
            "schedule's room; add them to the group, or add the schedule as a member"
        )
    return None


def _require_requester_or_admin(
    conn: sa.Connection, schedule: Schedule, actor: str, what: str
) -> None:
    """Refuse unless `actor` is the schedule's requester or an admin of its room's group."""
    user = get_user(conn, actor)
    if user.id == schedule.requester_id:
        return
    group = get_group(conn, get_room(conn, schedule.room_id).group_id)
    found = membership(conn, group.id, user.id)
    if found is None or found.role is not Role.admin:
        raise NotAllowed(
            f"{user.name} may not {what} schedule {schedule.name}: only its requester "
            f"({get_user(conn, schedule.requester_id).name}) or an admin of group "
            f"{group.name}, which owns its room, can; ask one of them, or use --as"
        )


def _cron_problem(exc: Exception) -> str:
    if "out of range" in str(exc):
        return "a field is out of range (minute 0-59, hour 0-23, day 1-31, month 1-12, weekday 0-6)"
    return "each field is a number, a name (jan, mon), `*`, a range, a list or a step (*/15)"


def _checked_request(request: str) -> str:
    """The request if a submit would take it and it carries no credential; else a UsageError."""
    text = strip_control(request)
    if not text.strip():
        raise UsageError("the request is empty; say what the agent should do on each run")
    if len(request) > REQUEST_LIMIT:
        raise UsageError(f"the request is longer than {REQUEST_LIMIT} characters; shorten it")
    if secret_spans(text):
        # Masked, it would no longer say what its author meant, on every run from now on.
        raise UsageError(
            "the request carries what looks like a credential; cairn stores the schedule's "
            "request and submits it on every run, so take the credential out"
        )
    return request
