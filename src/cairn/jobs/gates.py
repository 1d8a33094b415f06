"""A person's decisions: each records a decision and, at most, makes the job runnable again."""

from __future__ import annotations

import sqlalchemy as sa

from cairn.errors import InvalidState, NotAllowed, UsageError
from cairn.sanitize import Sanitizer
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Job
from cairn.store.rooms import get_room

_GATE_AT = {
    Stage.awaiting_run_approval: Gate.run,
    Stage.awaiting_dependency_approval: Gate.dependency,
    Stage.awaiting_review: Gate.integration,
}


def approve(conn: sa.Connection, job_id: int, actor: str, reason: str | None = None) -> Job:
    """Approve the gate the job waits at; a runner then carries the job on."""
    job, gate = _waiting_gate(conn, job_id)
    _authorize(conn, job, gate, actor)
    decision = decisions.append(
        conn, job_id=job.id, gate=gate, verdict=Verdict.approved, actor=actor, reason=reason
    )
    if gate is Gate.dependency:
        pending = dep_ledger.latest(conn, job.id)
        dep_ledger.decide(conn, pending.id, dep_ledger.APPROVED, decision.id)
    return job_ledger.transition(conn, job, job.stage, Status.queued)


def reject(
    conn: sa.Connection,
    job_id: int,
    actor: str,
    reason: str,
    *,
    sanitizer: Sanitizer | None = None,
) -> Job:
    """Reject at the gate the job waits at; a reason is required and recorded."""
    if not reason or not reason.strip():
        raise UsageError("a rejection needs a reason: pass --reason TEXT")
    job, gate = _waiting_gate(conn, job_id)
    _authorize(conn, job, gate, actor)
    decision = decisions.append(
        conn, job_id=job.id, gate=gate, verdict=Verdict.rejected, actor=actor, reason=reason
    )
    if gate is Gate.dependency:
        # The agent is told, in its own context, and may go on without the package.
        pending = dep_ledger.latest(conn, job.id)
        dep_ledger.decide(conn, pending.id, dep_ledger.REJECTED, decision.id)
        return job_ledger.transition(conn, job, job.stage, Status.queued)
    # The decision keeps the reason as written; the diagnosis users see is masked and bounded.
    diagnosis = (sanitizer or Sanitizer()).clean(f"rejected at the {gate} gate: {reason}")
    return job_ledger.transition(conn, job, Stage.rejected, Status.rejected, diagnosis=diagnosis)


def cancel(conn: sa.Connection, job_id: int, actor: str) -> Job:
    """Cancel a job that has not ended; a runner holding it stops at its next write."""
    job = job_ledger.lock_job(conn, job_id)
    if job.status.is_terminal:
        raise InvalidState(
            f"job {job_id} already ended ({job.status}); submit the request again to start anew"
        )
    if job.stage is Stage.delivering:
        raise InvalidState(
            f"job {job_id} is delivering an approved result; delivery finishes on its own"
        )
    request = job_ledger.get_request(conn, job.request_id)
    user = get_user(conn, actor)
    if user.id != request.requester_id and _role(conn, job, actor) != "admin":
        raise NotAllowed(
            f"only the requester or an admin of the room's group can cancel job {job_id}"
        )
    decisions.append(conn, job_id=job.id, gate=Gate.cancel, verdict=Verdict.cancelled, actor=actor)
    return job_ledger.transition(conn, job, Stage.cancelled, Status.cancelled)


def resume(conn: sa.Connection, job_id: int, actor: str) -> Job:
    """Make a blocked job runnable again once its owner fixed what blocked it."""
    job = job_ledger.lock_job(conn, job_id)
    if job.status is not Status.blocked:
        raise InvalidState(f"job {job_id} is {job.status}, not blocked; there is nothing to resume")
    if _role(conn, job, actor) is None:
        raise NotAllowed(f"{actor} is not a member of the room's group")
    decisions.append(conn, job_id=job.id, gate=Gate.resume, verdict=Verdict.resumed, actor=actor)
    return job_ledger.transition(conn, job, job.stage, Status.queued)


def _waiting_gate(conn: sa.Connection, job_id: int) -> tuple[Job, Gate]:
    job = job_ledger.lock_job(conn, job_id)
    gate = _GATE_AT.get(job.stage)
    if gate is None or job.status is not Status.waiting:
        raise InvalidState(
            f"job {job_id} is not waiting at a gate (it is {job.status} at {job.stage})"
        )
    return job, gate


def _authorize(conn: sa.Connection, job: Job, gate: Gate, actor: str) -> None:
    """Run gate: never the requester. Integration gate: an admin, their own request included."""
    role = _role(conn, job, actor)
    if role != "admin":
        raise NotAllowed(f"only an admin of the room's group can decide the {gate} gate")
    requester = get_user(conn, job_ledger.get_request(conn, job.request_id).requester_id)
    if gate is Gate.run and requester.name == actor:
        raise NotAllowed("a requester cannot approve the run of their own job; ask another admin")


def _role(conn: sa.Connection, job: Job, actor: str) -> str | None:
    group = get_group(conn, get_room(conn, job.room_id).group_id)
    found = membership(conn, group.id, get_user(conn, actor).id)
    return found.role if found else None
