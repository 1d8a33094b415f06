"""Submitting, running, inspecting and deciding jobs."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from cairn.cli.context import (
    AS_OPTION,
    JOB_ARGUMENT,
    JSON_OPTION,
    console,
    errors,
    print_json,
    session,
)
from cairn.errors import UsageError
from cairn.stages import Status

if TYPE_CHECKING:
    from cairn.cli.remote import Remote
    from cairn.jobs.view import JobDetail
    from cairn.store import Store
    from cairn.store.records import Job

AGENT_OPTION = typer.Option(
    None,
    "--agent",
    help="The agent: a named agent (`cairn agent list`), openai:MODEL, or script:PATH to a "
    "YAML script (default: the room's default agent).",
)
KIND_OPTION = typer.Option(
    "interactive", "--kind", help="interactive, or scheduled (a fresh context every run)."
)


def submit(
    ctx: typer.Context,
    room: str,
    request: str,
    agent: str | None = AGENT_OPTION,
    as_user: str | None = AS_OPTION,
    as_json: bool = JSON_OPTION,
    kind: str = KIND_OPTION,
) -> None:
    """Submit a request to a room; prints the new job's id."""
    remote = session(ctx).client(as_user)
    if remote is not None:
        job_id = _submit_remote(remote, room, request, agent, kind)
    else:
        job_id = _submit(ctx, room, request, agent, as_user, kind).id
    if as_json:
        print_json({"id": job_id})
    else:
        typer.echo(job_id)


def run(
    ctx: typer.Context,
    room: str,
    request: str,
    agent: str | None = AGENT_OPTION,
    as_user: str | None = AS_OPTION,
    kind: str = KIND_OPTION,
) -> None:
    """Submit a request and work on it in the foreground until it needs a person or ends.

    Ctrl-C (or SIGTERM) hands the job back and prints the command that continues it.
    """
    from cairn.cli.next_steps import job_line
    from cairn.cli.progress import StagePrinter

    job = _submit(ctx, room, request, agent, as_user, kind)
    console.print(f"job {job.id} submitted")
    if job.status is Status.waiting:
        # Submit decided the run gate: nothing runs here until a person approves.
        StagePrinter()(job)
        console.print(f"job {job.id}: {job_line(job)}")
        return
    driven = _work(ctx, until_idle=True, job_id=job.id)
    if driven and driven[-1].status in (Status.failed, Status.blocked):
        raise typer.Exit(1)


def work(
    ctx: typer.Context,
    until_idle: bool = typer.Option(
        False, "--until-idle", help="Stop once nothing is queued or held by another runner."
    ),
    concurrency: int = typer.Option(
        1, "--concurrency", help="Drive up to this many jobs at once (1 to 64)."
    ),
    poll_only: bool = typer.Option(
        False,
        "--poll-only",
        help="Find work by polling alone, without PostgreSQL notifications (for a connection "
        "pooler that drops them).",
    ),
) -> None:
    """Run a runner: claim runnable jobs and drive each to its next gate or its end.

    Ctrl-C or SIGTERM hands the jobs in flight back at once (exit 130 or 143).
    """
    _work(ctx, until_idle=until_idle, job_id=None, concurrency=concurrency, listen=not poll_only)


def jobs(
    ctx: typer.Context,
    room: str | None = typer.Option(None, "--room", help="Only jobs in this room."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List jobs with their stage and status."""
    from cairn.jobs.view import JobSummary, job_summaries
    from cairn.store.rooms import get_room

    remote = session(ctx).client()
    if remote is not None:
        found = remote.get("/api/jobs", {"room": room})
        rows = [JobSummary.model_validate(row) for row in found]
    else:
        with session(ctx).store() as store, store.begin() as conn:
            room_id = get_room(conn, room).id if room else None
            rows = job_summaries(conn, room_id)
    if as_json:
        print_json([row.model_dump(mode="json") for row in rows])
        return
    for row in rows:
        first = row.request.splitlines()[0][:60]
        console.print(f"{row.id:>4}  {row.room:<12} {row.status:<10} {row.stage:<28} {first}")


def show(ctx: typer.Context, job_id: int = JOB_ARGUMENT, as_json: bool = JSON_OPTION) -> None:
    """Show one job: stages, decisions, dependency requests, effects and diagnosis."""
    from cairn.cli.next_steps import diagnosis

    detail = _detail(ctx, job_id)
    pull = detail.pull_request
    # The CLI's words for the next actions follow the diagnosis; `next` keeps them structured.
    shown = diagnosis(detail.diagnosis, detail.next)
    if as_json:
        print_json(detail.model_dump(mode="json") | {"diagnosis": shown})
        return
    console.print(
        f"job {detail.id} in room {detail.room}: {detail.status} at {detail.stage}", style="bold"
    )
    console.print(f"request ({detail.requester}): {detail.request}")
    for stage in detail.stages:
        console.print(f"  {stage.started_at:%H:%M:%S}  {stage.name:<28} {stage.status}")
    for decision in detail.decisions:
        why = f": {decision.reason}" if decision.reason else ""
        console.print(f"  decision  {decision.gate} {decision.verdict} by {decision.actor}{why}")
    for dep in detail.dependency_requests:
        console.print(f"  dependency  {dep.ecosystem} {dep.name} {dep.version} ({dep.status})")
    for effect in detail.effects:
        console.print(f"  effect  {effect.kind} {effect.status}")
    _print_usage(detail)
    if pull is not None:
        checks = ", ".join(f"{c['name']} {c['state']}" for c in pull.get("checks", [])) or "none"
        console.print(
            f"  pull request #{pull['number']} {pull.get('state', pull.get('error'))} "
            f"{pull.get('url', '')} (checks: {checks})"
        )
    if detail.review:
        console.print(f"\n{detail.review.summary}")
    if shown:
        console.print(f"\ndiagnosis: {shown}", style="yellow")


def _detail(ctx: typer.Context, job_id: int) -> JobDetail:
    """The job's detail: from the server as the token's user, else from the store."""
    from cairn.forges.credentials import secret_key
    from cairn.jobs.view import JobDetail, job_detail, with_pull_request

    s = session(ctx)
    remote = s.client()
    if remote is not None:
        return JobDetail.model_validate(remote.get(f"/api/jobs/{job_id}"))
    with s.store() as store, store.begin() as conn:
        return with_pull_request(conn, job_detail(conn, job_id), secret_key(s.config))


TRANSCRIPT_LINES = 10
"""Tool calls the text view of `cairn show` lists; `--json` lists up to 50."""


def _print_usage(detail: JobDetail) -> None:
    """The usage line and the first tool calls, when the job's agent has run."""
    usage = detail.usage
    if usage.agent_runs:
        corrective = f" ({usage.corrective_runs} corrective)" if usage.corrective_runs else ""
        console.print(
            f"usage: {usage.agent_runs} agent run{'s' * (usage.agent_runs != 1)}{corrective}, "
            f"{usage.model_requests} model requests, {usage.input_tokens} input and "
            f"{usage.output_tokens} output tokens, {usage.seconds:.1f} s"
        )
    summary = detail.transcript_summary
    total = len(summary.calls) + summary.omitted
    if not total:
        return
    console.print(f"tool calls ({total}):")
    for call in summary.calls[:TRANSCRIPT_LINES]:
        target = f" {call.target}" if call.target else ""
        console.print(f"  {call.name}{target}  {call.status}")
    if total > TRANSCRIPT_LINES:
        console.print(f"  ... and {total - TRANSCRIPT_LINES} more (`--json` lists up to 50)")


def audit_verify(
    ctx: typer.Context,
    head: str | None = typer.Option(
        None, "--head", help="A head printed by `cairn audit head` earlier: it must still be held."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Check the whole decision chain and name the first broken row."""
    from cairn.jobs import audit
    from cairn.store.decisions import ChainReport

    if head is not None and not re.fullmatch(r"[0-9a-f]{64}", head.strip().lower()):
        raise UsageError("--head takes the 64-character hash that `cairn audit head` printed")
    remote = session(ctx).client()
    if remote is not None:
        found = remote.get("/api/audit/verify", {"head": head.strip().lower() if head else None})
        anchor = audit.parse_head(head)
        report = ChainReport(
            checked=found["checked"],
            broken_id=found["broken_id"],
            problem=found["problem"],
            head_in_chain=found.get("head_in_chain"),
        )
    else:
        with session(ctx).store() as store, store.begin() as conn:
            report, anchor = audit.verify(conn, head)
    if as_json:
        print_json(audit.report_data(report, anchor))
    elif report.ok:
        held = f"; it still holds head {anchor[:12]}" if anchor else ""
        console.print(f"decision chain intact: {report.checked} decisions verified{held}")
    if report.broken_id is not None:
        typer.echo(f"decision {report.broken_id} is broken: {report.problem}", err=True)
    elif not report.ok:
        typer.echo(
            f"the decision chain no longer holds head {anchor}: decisions after it were removed "
            "(or the head is from another store); compare with the heads you kept",
            err=True,
        )
    if not report.ok:
        raise typer.Exit(1)


def audit_head(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Print the decision count and the chain's head hash, to keep somewhere else."""
    from cairn.jobs.decision_log import chain_head

    remote = session(ctx).client()
    if remote is not None:
        head = remote.get("/api/audit/head")
    else:
        with session(ctx).store() as store, store.begin() as conn:
            head = chain_head(conn)
    if as_json:
        print_json({"count": head["count"], "head": head["head"]})
    else:
        typer.echo(f"{head['count']} decisions, head {head['head']}")


def _submit(
    ctx: typer.Context, room: str, request: str, agent: str | None, as_user: str | None, kind: str
) -> Job:
    from cairn.jobs.submit import resolve_agent, submit_job
    from cairn.sanitize import user_sanitizer

    s = session(ctx)
    with s.store() as store, store.begin() as conn:
        return submit_job(
            conn,
            room=room,
            text=request,
            agent=resolve_agent(conn, room, agent),
            actor=s.actor(as_user),
            sanitizer=user_sanitizer(s.config),
            kind=kind,
        )


def _submit_remote(remote: Remote, room: str, request: str, agent: str | None, kind: str) -> int:
    """Submit through the server; a local `script:PATH` travels as the script's YAML."""
    from cairn.cli.remote import local_script

    script, agent = local_script(agent)
    body = {"room": room, "request": request, "agent": agent, "script": script, "kind": kind}
    made = remote.post("/api/jobs", body)
    return int(made["id"])


def _work(
    ctx: typer.Context,
    *,
    until_idle: bool,
    job_id: int | None,
    concurrency: int = 1,
    listen: bool = True,
) -> list[Job]:
    from cairn.cli.next_steps import job_line
    from cairn.cli.progress import StagePrinter
    from cairn.engine import Faults
    from cairn.jobs.concurrency import MAX_CONCURRENCY, RunnerProcess, connections_needed
    from cairn.jobs.runner import Runner, Terminated, sigterm_interrupts

    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise UsageError(f"--concurrency takes a number of jobs from 1 to {MAX_CONCURRENCY}")
    s = session(ctx)
    pool = connections_needed(concurrency) if concurrency > 1 else None
    with s.store(connections=pool) as store:
        # CAIRN_FAULTS is a testing aid (crash points); only this entry point reads it.
        faults = Faults.parse(os.environ.get("CAIRN_FAULTS"))
        printer, idle = StagePrinter(), _waiting(job_id)
        try:
            with (
                sigterm_interrupts(),
                console.status("working (Ctrl-C stops; the job resumes from its last stage)"),
            ):
                if job_id is None:  # `cairn work`: a runner of its own in the runners ledger
                    process = RunnerProcess(
                        store,
                        s.config,
                        concurrency=concurrency,
                        on_progress=printer,
                        on_idle=idle,
                        faults=faults,
                        listen=listen,
                    )
                    driven = process.work(until_idle=until_idle)
                else:
                    runner = Runner(
                        store, s.config, on_progress=printer, on_idle=idle, faults=faults
                    )
                    driven = runner.work(until_idle=until_idle, job_id=job_id)
        except KeyboardInterrupt as stop:
            # The runner has already handed its job back; say what continues it.
            errors.print(_stopped(store, job_id))
            raise typer.Exit(143 if isinstance(stop, Terminated) else 130) from None
    for job in driven:
        line = job_line(job)
        if line:
            console.print(f"job {job.id}: {line}")
    return driven


def _waiting(job_id: int | None) -> Callable[[], None]:
    """What an idle runner says, once each time it starts waiting."""
    if job_id is None:
        text = "waiting for a job to run (Ctrl-C stops)"
    else:
        text = f"job {job_id} is held by another runner; waiting until it is free (Ctrl-C stops)"
    return lambda: console.print(text)


def _stopped(store: Store, job_id: int | None) -> str:
    """The line a stopped runner leaves: for `run`, the one command that continues its job."""
    from cairn.cli.next_steps import job_line
    from cairn.store import jobs as job_ledger

    if job_id is None:
        return "stopped; any job it held was handed back and resumes from its last stage"
    with store.begin() as conn:
        job = job_ledger.get_job(conn, job_id)
    if job.status.is_terminal:
        return f"stopped; job {job.id} is {job.status}, nothing to continue"
    step = job_line(job) or "`cairn work --until-idle` continues it from there"
    return f"stopped; job {job.id} is at {job.stage}: {step}"
