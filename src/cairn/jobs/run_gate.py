"""The run gate: nothing runs until group policy or a person other than the requester approves."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from cairn.jobs.gates import waiting_actions
from cairn.jobs.policy import GroupPolicy, policy_label
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group
from cairn.store.records import Job
from cairn.store.rooms import get_room

if TYPE_CHECKING:
    from cairn.jobs.drive import Drive


def decide(conn: sa.Connection, job: Job, kind: str, *, runnable: Status = Status.queued) -> Job:
    """Put a new job at the run gate, in the caller's transaction (the one that created it).

    When the group's policy approves this kind of job, the approval is recorded as an `auto`
    decision naming the policy and the job is left `runnable` past the gate; otherwise it
    waits there for an admin other than the requester.
    """
    # Read the policy now, not earlier: the gate decides under the current one.
    group = get_group(conn, get_room(conn, job.room_id).group_id)
    policy = GroupPolicy.of(group)
    if not policy.auto_approves(kind):
        steps = waiting_actions(Stage.awaiting_run_approval, job.id, group.name)
        return job_ledger.transition(
            conn, job, Stage.awaiting_run_approval, Status.waiting, next_actions=steps
        )
    decisions.append(
        conn,
        job_id=job.id,
        gate=Gate.run,
        verdict=Verdict.auto,
        actor="policy",
        policy=policy_label(group, policy),
    )
    return job_ledger.transition(conn, job, Stage.awaiting_run_approval, runnable)


def queued(drive: Drive) -> bool:
    """A job still at `queued` (submitted by an older cairn) meets the run gate as submit does."""
    with drive.fenced() as conn:
        drive.job = decide(conn, drive.job, drive.request.kind, runnable=Status.running)
    drive.on_progress(drive.job)
    return False


def run_approved(drive: Drive) -> bool:
    """Past the run gate (a person's or the policy's approval), the job goes on into the
    workflow, whose first stage moves it with that stage's intent; without one it waits again."""
    with drive.store.read() as conn:
        passed = any(
            d.gate == Gate.run and d.verdict in (Verdict.approved, Verdict.auto)
            for d in decisions.for_job(conn, drive.job.id)
        )
    if not passed:
        drive.wait(Stage.awaiting_run_approval)
    return passed
