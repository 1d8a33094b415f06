"""Schedules: standing requests that `cairn work` fires as scheduled jobs."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import typer

from cairn.cli.context import AS_OPTION, JSON_OPTION, command_group, console, print_json, session
from cairn.cli.remote import local_script

if TYPE_CHECKING:
    from cairn.jobs.schedules import ScheduleView

schedule_app = command_group(
    "Standing requests fired as scheduled jobs by `cairn work` (cron times in UTC)."
)
NAME_ARGUMENT = typer.Argument(..., metavar="NAME", help="The schedule's name.")


@schedule_app.command("add")
def schedule_add(
    ctx: typer.Context,
    name: str = NAME_ARGUMENT,
    room: str = typer.Argument(..., metavar="ROOM", help="The room its jobs run in."),
    request: str = typer.Argument(..., metavar="REQUEST", help="What each run should do."),
    cron: str = typer.Option(
        ..., "--cron", help='When, in UTC: five cron fields, e.g. "0 3 * * 1" (Mondays 03:00).'
    ),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="The agent: script:PATH, openai:MODEL or a named agent (default: the room's).",
    ),
    as_user: str | None = AS_OPTION,
) -> None:
    """Add a schedule; each firing submits one scheduled job as its requester (--as)."""
    from cairn.jobs.schedules import add_schedule, check_cron, next_fire_time
    from cairn.jobs.submit import resolve_agent
    from cairn.sanitize import user_sanitizer
    from cairn.store.schema import utcnow

    s = session(ctx)
    stored = check_cron(cron)  # before anything else: the commonest mistake
    remote = s.client(as_user)
    if remote is not None:
        script, agent = local_script(agent)
        body = {"name": name, "room": room, "request": request, "cron": stored}
        made = remote.post("/api/schedules", body | {"agent": agent, "script": script})
        added, kept_cron = str(made["name"]), str(made["cron"])
    else:
        with s.store() as store, store.begin() as conn:
            schedule = add_schedule(
                conn,
                name=name,
                room=room,
                cron=stored,
                request=request,
                agent=resolve_agent(conn, room, agent),
                actor=s.actor(as_user),
                sanitizer=user_sanitizer(s.config),
            )
        added, kept_cron = schedule.name, schedule.cron
    first = next_fire_time(kept_cron, utcnow())
    console.print(
        f"schedule {added} added; it first fires at {first:%Y-%m-%d %H:%M} UTC "
        "while a runner works (`cairn work`)"
    )


@schedule_app.command("list")
def schedule_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List schedules with their next and last fire times and last job."""
    from cairn.jobs.schedules import schedule_views

    remote = session(ctx).client()
    if remote is not None:
        views = [_view(row) for row in remote.get("/api/schedules")]
    else:
        with session(ctx).store() as store, store.begin() as conn:
            views = schedule_views(conn)
    if as_json:
        print_json([view.to_data() for view in views])
        return
    if not views:
        console.print("no schedules yet")
    for view in views:
        last = "never fired"
        if view.last_fire_at is not None:
            made = f"job {view.last_job}" if view.last_job else "no job"
            last = f"last {view.last_fire_at:%Y-%m-%d %H:%M} UTC ({made})"
        upcoming = f"next {view.next_fire_at:%Y-%m-%d %H:%M} UTC" if view.next_fire_at else "never"
        console.print(
            f"{view.name:<16} {view.room:<12} {view.cron:<16} {upcoming}, {last}  "
            f"{view.request.splitlines()[0][:50]}"
        )
        if view.problem:
            console.print(f"  {view.problem}", style="red")
        if view.last_note:
            console.print(f"  {view.last_note}", style="yellow")


@schedule_app.command("remove")
def schedule_remove(
    ctx: typer.Context, name: str = NAME_ARGUMENT, as_user: str | None = AS_OPTION
) -> None:
    """Remove a schedule (its requester or a group admin); the jobs it submitted stay."""
    from cairn.jobs.schedules import remove_schedule

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        remote.delete(f"/api/schedules/{quote(name, safe='')}")
        removed = name
    else:
        with s.store() as store, store.begin() as conn:
            removed = remove_schedule(conn, name, actor=s.actor(as_user)).name
    console.print(f"schedule {removed} removed")


@schedule_app.command("fire")
def schedule_fire(
    ctx: typer.Context,
    name: str = NAME_ARGUMENT,
    as_json: bool = JSON_OPTION,
    as_user: str | None = AS_OPTION,
) -> None:
    """Fire a schedule now (its requester or a group admin): submit its scheduled job."""
    from cairn.jobs.schedules import fire_now
    from cairn.sanitize import user_sanitizer

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        fired = remote.post(f"/api/schedules/{quote(name, safe='')}/fire")
        job, at = fired["job"], datetime.fromisoformat(fired["fire_at"])
    else:
        with s.store() as store, store.begin() as conn:
            firing = fire_now(conn, name, user_sanitizer(s.config), actor=s.actor(as_user))
        job, at = firing.job_id, firing.fire_at
    if as_json:
        print_json({"job": job, "fire_at": at.isoformat()})
    else:
        typer.echo(job)


def _view(row: dict[str, Any]) -> ScheduleView:
    """A schedule the server listed, read back into the view the local list makes."""
    from cairn.jobs.schedules import ScheduleView

    def when(key: str) -> datetime | None:
        return datetime.fromisoformat(row[key]) if row.get(key) else None

    fields: dict[str, Any] = {k: row.get(k) for k in ScheduleView.__dataclass_fields__}
    return ScheduleView(
        **fields | {"next_fire_at": when("next_fire_at"), "last_fire_at": when("last_fire_at")}
    )
