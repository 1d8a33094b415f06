"""Submitting, running, inspecting and deciding jobs."""

from __future__ import annotations

import os

import typer

from cairn.agents.registry import load_agent_spec
from cairn.cli.context import AS_OPTION, JOB_ARGUMENT, JSON_OPTION, console, print_json, session
from cairn.cli.progress import StagePrinter, next_step
from cairn.engine import Faults
from cairn.jobs.runner import Runner
from cairn.jobs.submit import submit_job
from cairn.jobs.view import job_detail, job_summary
from cairn.sanitize import user_sanitizer
from cairn.stages import Status
from cairn.store import decisions
from cairn.store import jobs as job_ledger
from cairn.store.records import Job
from cairn.store.rooms import get_room

AGENT_OPTION = typer.Option(..., "--agent", help="The agent, e.g. script:PATH to a YAML script.")
KIND_OPTION = typer.Option(
    "interactive", "--kind", help="interactive, or scheduled (a fresh context every run)."
)


def submit(
    ctx: typer.Context,
    room: str,
    request: str,
    agent: str = AGENT_OPTION,
    as_user: str | None = AS_OPTION,
    as_json: bool = JSON_OPTION,
    kind: str = KIND_OPTION,
) -> None:
    """Submit a request to a room; prints the new job's id."""
    job = _submit(ctx, room, request, agent, as_user, kind)
    if as_json:
        print_json({"id": job.id})
    else:
        typer.echo(job.id)


def run(
    ctx: typer.Context,
    room: str,
    request: str,
    agent: str = AGENT_OPTION,
    as_user: str | None = AS_OPTION,
    kind: str = KIND_OPTION,
) -> None:
    """Submit a request and work on it in the foreground until it needs a person or ends."""
    job = _submit(ctx, room, request, agent, as_user, kind)
    console.print(f"job {job.id} submitted")
    driven = _work(ctx, until_idle=True, job_id=job.id)
    if driven and driven[-1].status in (Status.failed, Status.blocked):
        raise typer.Exit(1)


def work(
    ctx: typer.Context,
    until_idle: bool = typer.Option(
        False, "--until-idle", help="Stop once nothing is queued or held by another runner."
    ),
) -> None:
    """Run a runner: claim runnable jobs and drive each to its next gate or its end."""
    _work(ctx, until_idle=until_idle, job_id=None)


def jobs(
    ctx: typer.Context,
    room: str | None = typer.Option(None, "--room", help="Only jobs in this room."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List jobs with their stage and status."""
    with session(ctx).store() as store, store.begin() as conn:
        room_id = get_room(conn, room).id if room else None
        rows = [job_summary(conn, job) for job in job_ledger.list_jobs(conn, room_id)]
    if as_json:
        print_json(rows)
        return
    for row in rows:
        first = row["request"].splitlines()[0][:60]
        console.print(
            f"{row['id']:>4}  {row['room']:<12} {row['status']:<10} {row['stage']:<28} {first}"
        )


def show(ctx: typer.Context, job_id: int = JOB_ARGUMENT, as_json: bool = JSON_OPTION) -> None:
    """Show one job: stages, decisions, dependency requests, effects and diagnosis."""
    with session(ctx).store() as store, store.begin() as conn:
        detail = job_detail(conn, job_id)
    if as_json:
        print_json(detail)
        return
    console.print(
        f"job {detail['id']} in room {detail['room']}: {detail['status']} at {detail['stage']}",
        style="bold",
    )
    console.print(f"request ({detail['requester']}): {detail['request']}")
    for stage in detail["stages"]:
        console.print(f"  {stage['started_at'][11:19]}  {stage['name']:<28} {stage['status']}")
    for decision in detail["decisions"]:
        why = f": {decision['reason']}" if decision["reason"] else ""
        console.print(
            f"  decision  {decision['gate']} {decision['verdict']} by {decision['actor']}{why}"
        )
    for dep in detail["dependency_requests"]:
        console.print(
            f"  dependency  {dep['ecosystem']} {dep['name']} {dep['version']} ({dep['status']})"
        )
    for effect in detail["effects"]:
        console.print(f"  effect  {effect['kind']} {effect['status']}")
    if detail["review"]:
        console.print(f"\n{detail['review']['summary']}")
    if detail["diagnosis"]:
        console.print(f"\ndiagnosis: {detail['diagnosis']}", style="yellow")


def audit_verify(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Check the whole decision chain and name the first broken row."""
    with session(ctx).store() as store, store.begin() as conn:
        report = decisions.verify_chain(conn)
    if as_json:
        print_json({"ok": report.ok, "checked": report.checked, "broken_id": report.broken_id})
    elif report.ok:
        console.print(f"decision chain intact: {report.checked} decisions verified")
    if not report.ok:
        typer.echo(f"decision {report.broken_id} is broken: {report.problem}", err=True)
        raise typer.Exit(1)


def _submit(
    ctx: typer.Context, room: str, request: str, agent: str, as_user: str | None, kind: str
) -> Job:
    s = session(ctx)
    spec = load_agent_spec(agent)
    with s.store() as store, store.begin() as conn:
        return submit_job(
            conn,
            room=room,
            text=request,
            agent=spec,
            actor=s.actor(as_user),
            sanitizer=user_sanitizer(s.config),
            kind=kind,
        )


def _work(ctx: typer.Context, *, until_idle: bool, job_id: int | None) -> list[Job]:
    s = session(ctx)
    with s.store() as store:
        # CAIRN_FAULTS is a testing aid (crash points); only this entry point reads it.
        faults = Faults.parse(os.environ.get("CAIRN_FAULTS"))
        runner = Runner(store, s.config, on_progress=StagePrinter(), faults=faults)
        with console.status("working (Ctrl-C stops; the job resumes from its last stage)"):
            driven = runner.work(until_idle=until_idle, job_id=job_id)
    for job in driven:
        if job.diagnosis:
            console.print(f"job {job.id}: {job.diagnosis}")
        step = next_step(job)
        if step:
            console.print(f"job {job.id}: {step}")
    return driven
