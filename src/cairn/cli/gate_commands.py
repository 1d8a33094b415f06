"""Deciding jobs: approve or reject at a gate, cancel, resume, and retry an ended job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from cairn.cli.context import AS_OPTION, JOB_ARGUMENT, JSON_OPTION, console, print_json, session
from cairn.errors import NotAllowed
from cairn.stages import Stage, Status

if TYPE_CHECKING:
    from cairn.store.records import Job


@dataclass(frozen=True)
class Decided:
    """Where a job stands after a decision the server made (its answer to a POST)."""

    id: int
    stage: Stage
    status: Status

    @classmethod
    def of(cls, answer: Any) -> Decided:
        """The decision's answer, `{id, stage, status}`, read back."""
        return cls(
            id=int(answer["id"]), stage=Stage(answer["stage"]), status=Status(answer["status"])
        )


def approve(
    ctx: typer.Context,
    job_id: int = JOB_ARGUMENT,
    as_user: str | None = AS_OPTION,
    reason: str | None = typer.Option(None, "--reason", help="Why (recorded with the decision)."),
) -> None:
    """Approve the gate a job waits at (run, dependency or integration)."""
    from cairn.jobs import gates
    from cairn.sanitize import user_sanitizer

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        # The server refuses a blocked approval itself, with the same words.
        done = Decided.of(remote.post(f"/api/jobs/{job_id}/approve", {"reason": reason}))
        console.print(
            f"job {done.id}: approved at {done.stage}; a runner carries it on (`cairn work`)"
        )
        return
    with s.store() as store, store.begin() as conn:
        job = gates.approve(
            conn, job_id, s.actor(as_user), reason, sanitizer=user_sanitizer(s.config)
        )
    if job.status is Status.blocked:
        # Committed above: the job is blocked with its diagnosis; the approval was not recorded.
        raise NotAllowed(
            f"job {job.id} was not approved and is now blocked: {job.diagnosis}",
            next_actions=job.next_actions,
        )
    console.print(f"job {job.id}: approved at {job.stage}; a runner carries it on (`cairn work`)")


def reject(
    ctx: typer.Context,
    job_id: int = JOB_ARGUMENT,
    reason: str = typer.Option(..., "--reason", help="Why (required, recorded)."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Reject at the gate a job waits at, with a reason."""
    from cairn.jobs import gates
    from cairn.jobs.forge_reject import closes_pull_request
    from cairn.sanitize import user_sanitizer

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        job: Decided | Job = Decided.of(
            remote.post(f"/api/jobs/{job_id}/reject", {"reason": reason})
        )
        closing = False  # the server's runners close the pull request; the API says no more
    else:
        with s.store() as store, store.begin() as conn:
            job = gates.reject(
                conn, job_id, s.actor(as_user), reason, sanitizer=user_sanitizer(s.config)
            )
            closing = closes_pull_request(conn, job.id)
    console.print(f"job {job.id}: rejected; now {job.status} at {job.stage}")
    if closing:
        console.print("a runner (`cairn work`) closes its pull request, with your reason")


def reply(
    ctx: typer.Context,
    job_id: int = JOB_ARGUMENT,
    message: str = typer.Argument(..., metavar="MESSAGE", help="What to change (recorded)."),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="Start the agent in a new context holding the request, MESSAGE and the current "
        "diff, instead of its own conversation.",
    ),
    as_user: str | None = AS_OPTION,
) -> None:
    """Ask for changes to a job waiting for review; the same job works on them, then returns."""
    from cairn.jobs.reply import reply as reply_to
    from cairn.sanitize import user_sanitizer

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        body = {"message": message, "fresh": fresh}
        job: Decided | Job = Decided.of(remote.post(f"/api/jobs/{job_id}/reply", body))
    else:
        with s.store() as store, store.begin() as conn:
            job = reply_to(
                conn,
                job_id,
                s.actor(as_user),
                message,
                fresh=fresh,
                sanitizer=user_sanitizer(s.config),
            )
    where = (
        "in a fresh context holding the request, your message and the current diff"
        if fresh
        else "in its own context, with your message"
    )
    console.print(
        f"job {job.id}: changes requested; it goes back to {job.stage} {where}, then returns "
        "to review with the new change (a runner carries it on: `cairn work`)"
    )


def cancel(ctx: typer.Context, job_id: int = JOB_ARGUMENT, as_user: str | None = AS_OPTION) -> None:
    """Cancel a job that has not ended (the requester or an admin)."""
    from cairn.jobs import gates

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        remote.post(f"/api/jobs/{job_id}/cancel")
    else:
        with s.store() as store, store.begin() as conn:
            gates.cancel(conn, job_id, s.actor(as_user))
    console.print(f"job {job_id}: cancelled")


def resume(ctx: typer.Context, job_id: int = JOB_ARGUMENT, as_user: str | None = AS_OPTION) -> None:
    """Continue a blocked job once what blocked it is fixed (the requester or an admin)."""
    from cairn.jobs import gates

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        remote.post(f"/api/jobs/{job_id}/resume")
        # Worded from the job as it now stands, as below: the detail carries its baseline.
        detail = remote.get(f"/api/jobs/{job_id}")
        status, stage = Status(detail["status"]), Stage(detail["stage"])
        baseline = detail["baseline"]
    else:
        with s.store() as store, store.begin() as conn:
            job = gates.resume(conn, job_id, s.actor(as_user))
        status, stage, baseline = job.status, job.stage, job.baseline
    _resumed(job_id, status, stage, baseline)


def _resumed(job_id: int, status: Status, stage: Stage, baseline: str | None) -> None:
    """What a resumed job does next, in one line."""
    job = Decided(id=job_id, stage=stage, status=status)
    if job.status is Status.waiting:
        console.print(f"job {job_id}: waits at {job.stage} again for a decision")
        return
    if job.stage is Stage.delivering:
        console.print(f"job {job_id}: a runner retries the delivery, merge included (`cairn work`)")
        return
    if baseline is None:
        # What blocked it lay in the repository (or it had no baseline yet): fetched anew.
        console.print(
            f"job {job_id}: runnable again; a runner takes a fresh baseline of the base branch "
            "and carries it on (`cairn work`)"
        )
        return
    console.print(f"job {job_id}: runnable again; a runner carries it on (`cairn work`)")


def retry(
    ctx: typer.Context,
    job_id: int = JOB_ARGUMENT,
    as_user: str | None = AS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Request an ended job again as a new job linked to it; the old job stays as it is."""
    from cairn.jobs.submit import retry_job

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        job: Decided | Job = Decided.of(remote.post(f"/api/jobs/{job_id}/retry"))
    else:
        with s.store() as store, store.begin() as conn:
            job = retry_job(conn, job_id, s.actor(as_user))
    if as_json:
        print_json({"id": job.id})
    else:
        console.print(f"job {job.id} submitted as a retry of job {job_id}")
