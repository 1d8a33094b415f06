"""Jobs: list, detail, submit, and the decisions at their gates (as the token's user)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from cairn.api import visibility
from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import ROOM_NAME, ApproveBody, RejectBody, Reply, ReplyBody, SubmitBody
from cairn.errors import NotAllowed
from cairn.jobs.view import JobDetail, JobSummary
from cairn.stages import Status
from cairn.store.records import Job

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
# Every decision first checks that the caller belongs to the job's group, so that someone
# outside it learns nothing of where the job stands from the refusal.
JobId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The job's id.")]
DECIDE = responses(401, 403, 404, 409, 422, 503)


@router.get("", response_model=list[JobSummary], responses=responses(401, 403, 404, 422, 503))
def list_jobs(
    served: ServedDep,
    user: UserDep,
    room: Annotated[str | None, Query(pattern=ROOM_NAME)] = None,
    status: Status | None = None,
) -> list[JobSummary]:
    """The jobs of your groups' rooms (or one room's), oldest first."""
    from cairn.jobs.view import job_summaries

    with served.store.begin() as conn:
        if room is not None:
            rooms = {visibility.require_room(conn, user, room).name}
        else:
            rooms = {r.name for r in visibility.visible_rooms(conn, user)}
        found = job_summaries(conn)
    return [j for j in found if j.room in rooms and (status is None or j.status is status)]


@router.get("/{job_id}", response_model=JobDetail, responses=responses(401, 403, 404, 422, 503))
def show_job(job_id: JobId, served: ServedDep, user: UserDep) -> JobDetail:
    """Everything `cairn show --json` reports of the job.

    The diagnosis is the stored one; what can be done next is in `next`, structured, for each
    client to word (the CLI as commands, the web pages as buttons).
    """
    from cairn.forges.credentials import secret_key
    from cairn.jobs.view import job_detail, with_pull_request

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        return with_pull_request(conn, job_detail(conn, job_id), secret_key(served.config))


@router.post("", response_model=Reply, status_code=201, responses=DECIDE)
def submit(body: SubmitBody, served: ServedDep, user: UserDep) -> Reply:
    """Submit a request to a room; the job then waits at (or passes) its run gate."""
    from cairn.api.agent_choice import agent_spec
    from cairn.jobs.submit import submit_job

    with served.store.begin() as conn:
        spec = agent_spec(conn, body.room, body.agent, body.script)
        job = submit_job(
            conn,
            room=body.room,
            text=body.request,
            agent=spec,
            actor=user.name,
            sanitizer=served.sanitizer(),
            kind=body.kind,
        )
    return _reply(job)


@router.post("/{job_id}/approve", response_model=Reply, responses=DECIDE)
def approve(
    job_id: JobId, served: ServedDep, user: UserDep, body: ApproveBody | None = None
) -> Reply:
    """Approve the gate the job waits at (run, dependency or integration)."""
    from cairn.jobs import gates

    reason = body.reason if body else None
    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        job = gates.approve(conn, job_id, user.name, reason, sanitizer=served.sanitizer())
    if job.status is Status.blocked:
        # Committed: the job is blocked with its diagnosis; the approval was not recorded.
        raise NotAllowed(
            f"job {job.id} was not approved and is now blocked: {job.diagnosis}",
            next_actions=job.next_actions,
        )
    return _reply(job)


@router.post("/{job_id}/reject", response_model=Reply, responses=DECIDE)
def reject(job_id: JobId, body: RejectBody, served: ServedDep, user: UserDep) -> Reply:
    """Reject at the gate the job waits at; the reason is recorded with the decision."""
    from cairn.jobs import gates

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        job = gates.reject(conn, job_id, user.name, body.reason, sanitizer=served.sanitizer())
    return _reply(job)


@router.post("/{job_id}/reply", response_model=Reply, responses=DECIDE)
def reply(job_id: JobId, body: ReplyBody, served: ServedDep, user: UserDep) -> Reply:
    """Ask for changes to a job waiting for review; the same job works on them, then returns."""
    from cairn.jobs.reply import reply as reply_to

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        job = reply_to(
            conn, job_id, user.name, body.message, fresh=body.fresh, sanitizer=served.sanitizer()
        )
    return _reply(job)


@router.post("/{job_id}/cancel", response_model=Reply, responses=DECIDE)
def cancel(job_id: JobId, served: ServedDep, user: UserDep) -> Reply:
    """Cancel a job that has not ended (the requester or an admin)."""
    from cairn.jobs import gates

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        return _reply(gates.cancel(conn, job_id, user.name))


@router.post("/{job_id}/resume", response_model=Reply, responses=DECIDE)
def resume(job_id: JobId, served: ServedDep, user: UserDep) -> Reply:
    """Continue a blocked job once what blocked it is fixed (the requester or an admin)."""
    from cairn.jobs import gates

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        return _reply(gates.resume(conn, job_id, user.name))


@router.post("/{job_id}/retry", response_model=Reply, status_code=201, responses=DECIDE)
def retry(job_id: JobId, served: ServedDep, user: UserDep) -> Reply:
    """Request an ended job again as a new job linked to it; the answer is the new job."""
    from cairn.jobs.submit import retry_job

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        return _reply(retry_job(conn, job_id, user.name))


def _reply(job: Job) -> Reply:
    return Reply(id=job.id, stage=job.stage, status=job.status)
