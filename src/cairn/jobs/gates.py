"""A person's decisions: each is authorized, recorded, and at most makes the job runnable again.

Who may decide what (the authority matrix; "own" means the actor requested the job):

| gate        | approve                                   | reject (a reason is required)   |
| ----------- | ----------------------------------------- | ------------------------------- |
| run         | an admin, never for their own job         | an admin, own job included      |
| dependency  | an admin, or any member when the group's  | same as approve                 |
|             | policy says dependency_approval=member    |                                 |
| integration | an admin, own job included                | an admin, own job included      |
| cancel      | the requester or an admin                 |                                 |
| resume      | the requester or an admin                 |                                 |

Someone outside the room's group decides nothing. Before an approval, the requester's access
is verified again (see `access.py`); when it no longer holds, the job is blocked instead.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import InvalidState, NotAllowed, UsageError
from cairn.jobs.access import LostAccess, missing_access
from cairn.jobs.fresh_baseline import blocked_by_repository, resume_note
from cairn.jobs.policy import REASON_LIMIT, Approval, GroupPolicy, policy_label
from cairn.next_action import Action, NextAction
from cairn.sanitize import Sanitizer, strip_control
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Group, Job, Request, RequestStatus, Role
from cairn.store.rooms import get_room

GATE_AT = {
    Stage.awaiting_run_approval: Gate.run,
    Stage.awaiting_dependency_approval: Gate.dependency,
    Stage.awaiting_review: Gate.integration,
}


def waiting_actions(stage: Stage, job_id: int, group: str) -> tuple[NextAction, ...]:
    """What a person can do about a job waiting at `stage` (a gate of group `group`'s room)."""
    reject = NextAction(Action.reject, job=job_id)
    if stage is Stage.awaiting_run_approval:
        return (
            NextAction(Action.approve_run, job=job_id),
            reject,
            # A lone admin cannot approve their own run: another admin, or the policy, must.
            NextAction(Action.add_admin),
            NextAction(Action.auto_approve_runs, group=group),
        )
    if stage is Stage.awaiting_dependency_approval:
        return (NextAction(Action.approve_dependency, job=job_id), reject)
    return (
        NextAction(Action.review, job=job_id),
        NextAction(Action.approve, job=job_id),
        NextAction(Action.reply, job=job_id),
        reject,
    )


def approve(
    conn: sa.Connection,
    job_id: int,
    actor: str,
    reason: str | None = None,
    *,
    sanitizer: Sanitizer | None = None,
) -> Job:
    """Approve the gate the job waits at; a runner then carries the job on.

    When the requester's access no longer holds, nothing is approved: the job is returned
    blocked, with a diagnosis naming what is missing.
    """
    job, gate = _waiting_gate(conn, job_id)
    request = job_ledger.get_request(conn, job.request_id)
    group = _group(conn, job)
    policy = GroupPolicy.of(group)
    authorize(conn, gate, Verdict.approved, actor, request=request, group=group, policy=policy)
    lost = missing_access(conn, job, request)
    if lost:
        return _block(conn, job, lost)
    decision = decisions.append(
        conn,
        job_id=job.id,
        gate=gate,
        verdict=Verdict.approved,
        actor=actor,
        reason=(sanitizer or Sanitizer()).clean(reason, REASON_LIMIT) if reason else None,
        policy=policy_label(group, policy),
    )
    if gate is Gate.dependency:
        pending = dep_ledger.latest(conn, job.id)
        dep_ledger.decide(conn, pending.id, RequestStatus.approved, decision.id)
    return job_ledger.transition(conn, job, job.stage, Status.queued)


def _block(conn: sa.Connection, job: Job, lost: LostAccess) -> Job:
    """Block the job where it waits: its requester's access no longer holds."""
    diagnosis = Sanitizer(environ={}).clean(lost.diagnosis)
    return job_ledger.transition(
        conn, job, job.stage, Status.blocked, diagnosis=diagnosis, next_actions=lost.next_actions
    )


def reject(
    conn: sa.Connection,
    job_id: int,
    actor: str,
    reason: str,
    *,
    sanitizer: Sanitizer | None = None,
) -> Job:
    """Reject at the gate the job waits at; a reason is required and recorded."""
    if not reason or not strip_control(reason).strip():
        raise UsageError("a rejection needs a reason: pass --reason TEXT")
    job, gate = _waiting_gate(conn, job_id)
    request = job_ledger.get_request(conn, job.request_id)
    group = _group(conn, job)
    policy = GroupPolicy.of(group)
    authorize(conn, gate, Verdict.rejected, actor, request=request, group=group, policy=policy)
    reason = (sanitizer or Sanitizer()).clean(reason, REASON_LIMIT)
    decision = decisions.append(
        conn,
        job_id=job.id,
        gate=gate,
        verdict=Verdict.rejected,
        actor=actor,
        reason=reason,
        policy=policy_label(group, policy),
    )
    if gate is Gate.dependency:
        # The agent is told, in its own context, and may go on without the package.
        pending = dep_ledger.latest(conn, job.id)
        dep_ledger.decide(conn, pending.id, RequestStatus.rejected, decision.id)
        return job_ledger.transition(conn, job, job.stage, Status.queued)
    if gate is Gate.integration:
        from cairn.jobs.forge_reject import intend_close

        # Closed with the reason by a runner, which holds the room's forge credential.
        intend_close(conn, job.id)
    diagnosis = (sanitizer or Sanitizer()).clean(f"rejected at the {gate} gate: {reason}")
    return job_ledger.transition(conn, job, Stage.rejected, Status.rejected, diagnosis=diagnosis)


def cancel(conn: sa.Connection, job_id: int, actor: str) -> Job:
    """Cancel a job that has not ended; a runner holding it stops at its next write."""
    job = job_ledger.lock_job(conn, job_id)
    if job.status.is_terminal:
        raise InvalidState(
            f"job {job_id} already ended ({job.status})",
            next_actions=[NextAction(Action.retry, job=job_id)],
        )
    # A delivery blocked (a merge left to a person) waits for people, who may decide to stop it.
    if job.stage is Stage.delivering and job.status is not Status.blocked:
        raise InvalidState(
            f"job {job_id} is delivering an approved result; delivery finishes on its own"
        )
    _requester_or_admin(conn, job, actor, "cancel")
    decisions.append(conn, job_id=job.id, gate=Gate.cancel, verdict=Verdict.cancelled, actor=actor)
    from cairn.jobs.forge_reject import intend_close

    # A cancelled job's draft must not stay open on the forge, where anyone could merge it.
    intend_close(conn, job.id)
    return job_ledger.transition(conn, job, Stage.cancelled, Status.cancelled)


def resume(conn: sa.Connection, job_id: int, actor: str) -> Job:
    """Make a blocked job runnable again once what blocked it is fixed.

    A job blocked while it waited at a gate that nobody decided goes back to waiting there.
    """
    job = job_ledger.lock_job(conn, job_id)
    if job.status is not Status.blocked:
        raise InvalidState(f"job {job_id} is {job.status}, not blocked; there is nothing to resume")
    _requester_or_admin(conn, job, actor, "resume")
    lost = missing_access(conn, job, job_ledger.get_request(conn, job.request_id))
    if lost:
        raise NotAllowed(
            f"job {job_id} cannot go on yet: {lost.diagnosis}", next_actions=lost.next_actions
        )
    # A block whose cause lies in the repository needs the owner's fix: a fresh baseline.
    fresh = blocked_by_repository(conn, job)
    note = resume_note(job, get_room(conn, job.room_id).base_branch) if fresh else None
    decisions.append(
        conn, job_id=job.id, gate=Gate.resume, verdict=Verdict.resumed, actor=actor, reason=note
    )
    gate = GATE_AT.get(job.stage)
    # Without a recorded baseline, the runner fetches the base branch again before going on.
    fields: dict[str, Any] = {"baseline": None} if fresh else {}
    if gate and not _gate_decided(conn, job, gate):
        steps = waiting_actions(job.stage, job.id, _group(conn, job).name)
        return job_ledger.transition(
            conn, job, job.stage, Status.waiting, next_actions=steps, **fields
        )
    return job_ledger.transition(conn, job, job.stage, Status.queued, **fields)


def authorize(
    conn: sa.Connection,
    gate: Gate,
    verdict: Verdict,
    actor: str,
    *,
    request: Request,
    group: Group,
    policy: GroupPolicy,
) -> None:
    """Refuse, with why, unless `actor` may give `verdict` at `gate` (the matrix above)."""
    user = get_user(conn, actor)
    found = membership(conn, group.id, user.id)
    if found is None:
        raise NotAllowed(
            f"{actor} is not a member of group {group.name}, which owns the job's room; "
            f"only its admins decide the {gate} gate"
        )
    needed = policy.dependency_approval if gate is Gate.dependency else Approval.admin
    if needed is Approval.admin and found.role is not Role.admin:
        setting = " (dependency_approval=admin)" if gate is Gate.dependency else ""
        raise NotAllowed(
            f"only an admin of group {group.name} can decide the {gate} gate{setting}; "
            f"{actor} is a member, who can see the job but not decide it"
        )
    if gate is Gate.run and verdict is Verdict.approved and user.id == request.requester_id:
        raise NotAllowed(
            f"{actor} requested this job and cannot approve its run, even as an admin "
            f"(its own job); another admin of group {group.name} must approve it"
        )


def _requester_or_admin(conn: sa.Connection, job: Job, actor: str, what: str) -> None:
    request = job_ledger.get_request(conn, job.request_id)
    user = get_user(conn, actor)
    found = membership(conn, _group(conn, job).id, user.id)
    if user.id != request.requester_id and (found is None or found.role is not Role.admin):
        raise NotAllowed(
            f"only the requester or an admin of the room's group can {what} job {job.id}"
        )


def _gate_decided(conn: sa.Connection, job: Job, gate: Gate) -> bool:
    """Whether the gate the job stands at was passed (so a runner, not a person, goes next)."""
    if gate is Gate.dependency:
        return dep_ledger.latest(conn, job.id).status != RequestStatus.pending
    passed = {Verdict.approved.value, Verdict.auto.value}
    return any(d.gate == gate and d.verdict in passed for d in decisions.for_job(conn, job.id))


def _waiting_gate(conn: sa.Connection, job_id: int) -> tuple[Job, Gate]:
    job = job_ledger.lock_job(conn, job_id)
    gate = GATE_AT.get(job.stage)
    if gate is None or job.status is not Status.waiting:
        raise InvalidState(
            f"job {job_id} is not waiting at a gate (it is {job.status} at {job.stage})"
        )
    return job, gate


def _group(conn: sa.Connection, job: Job) -> Group:
    return get_group(conn, get_room(conn, job.room_id).group_id)
