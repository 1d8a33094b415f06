"""A job's dependency requests: listed by its group, decided at the dependency gate."""

from __future__ import annotations

from typing import Annotated

import sqlalchemy as sa
from fastapi import APIRouter, Path

from cairn.api import visibility
from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import ApproveBody, RejectBody, Reply
from cairn.errors import InvalidState, NotAllowed, NotFound
from cairn.jobs.view import DependencyRequestView
from cairn.stages import Stage, Status
from cairn.store.records import User

router = APIRouter(prefix="/api/jobs/{job_id}/dependencies", tags=["dependencies"])
JobId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The job's id.")]
RequestId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The dependency request's id.")]
DECIDE = responses(401, 403, 404, 409, 422, 503)


@router.get(
    "", response_model=list[DependencyRequestView], responses=responses(401, 403, 404, 422, 503)
)
def list_requests(job_id: JobId, served: ServedDep, user: UserDep) -> list[DependencyRequestView]:
    """Every package the job's agent asked for, with where each ask stands."""
    from cairn.store import dependency_requests as dep_ledger

    with served.store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        found = dep_ledger.for_job(conn, job_id)
    return [DependencyRequestView.model_validate(d) for d in found]


@router.post("/{request_id}/approve", response_model=Reply, responses=DECIDE)
def approve(
    job_id: JobId,
    request_id: RequestId,
    served: ServedDep,
    user: UserDep,
    body: ApproveBody | None = None,
) -> Reply:
    """Approve the exact package version the job waits for (who may: the group's policy)."""
    from cairn.jobs import gates

    with served.store.begin() as conn:
        _require_pending(conn, user, job_id, request_id)
        reason = body.reason if body else None
        job = gates.approve(conn, job_id, user.name, reason, sanitizer=served.sanitizer())
    if job.status is Status.blocked:
        raise NotAllowed(
            f"job {job.id} was not approved and is now blocked: {job.diagnosis}",
            next_actions=job.next_actions,
        )
    return Reply(id=job.id, stage=job.stage, status=job.status)


@router.post("/{request_id}/reject", response_model=Reply, responses=DECIDE)
def reject(
    job_id: JobId, request_id: RequestId, body: RejectBody, served: ServedDep, user: UserDep
) -> Reply:
    """Refuse the package, with a reason; the agent is told and may go on without it."""
    from cairn.jobs import gates

    with served.store.begin() as conn:
        _require_pending(conn, user, job_id, request_id)
        job = gates.reject(conn, job_id, user.name, body.reason, sanitizer=served.sanitizer())
    return Reply(id=job.id, stage=job.stage, status=job.status)


def _require_pending(conn: sa.Connection, user: User, job_id: int, request_id: int) -> None:
    """Refuse unless `request_id` is the job's request its dependency gate waits on."""
    from cairn.store import dependency_requests as dep_ledger
    from cairn.store import jobs as job_ledger
    from cairn.store.records import RequestStatus

    visibility.require_job(conn, user, job_id)
    asked = {d.id: d for d in dep_ledger.for_job(conn, job_id)}
    if request_id not in asked:
        raise NotFound(f"job {job_id} has no dependency request {request_id}")
    job = job_ledger.get_job(conn, job_id)
    waiting = job.stage is Stage.awaiting_dependency_approval and job.status is Status.waiting
    if not waiting or asked[request_id].status is not RequestStatus.pending:
        raise InvalidState(
            f"dependency request {request_id} of job {job_id} is not the one the job waits "
            f"on (it is {asked[request_id].status}; the job is {job.status} at {job.stage})"
        )
