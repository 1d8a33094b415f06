"""The run gate: nothing runs until group policy or a person other than the requester approves."""

from __future__ import annotations

from cairn.jobs.drive import Drive
from cairn.jobs.policy import GroupPolicy, policy_label
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group


def queued(drive: Drive) -> None:
    """A new job meets the run gate: policy may approve its kind; otherwise a person must."""
    # Read the policy now, not when the drive began: the gate decides under the current one.
    with drive.store.begin() as conn:
        group = get_group(conn, drive.group.id)
    policy = GroupPolicy.of(group)
    if not policy.auto_approves(drive.request.kind):
        drive.move(Stage.awaiting_run_approval, Status.waiting)
        return
    with drive.fenced() as conn:
        decisions.append(
            conn,
            job_id=drive.job.id,
            gate=Gate.run,
            verdict=Verdict.auto,
            actor="policy",
            policy=policy_label(group, policy),
        )
        drive.job = job_ledger.transition(
            conn, drive.job, Stage.awaiting_run_approval, Status.running
        )
    drive.move(Stage.preparing_baseline)


def run_approved(drive: Drive) -> None:
    """A person approved the run; without a recorded approval the job waits at the gate again."""
    with drive.store.begin() as conn:
        passed = any(
            d.gate == Gate.run and d.verdict in (Verdict.approved, Verdict.auto)
            for d in decisions.for_job(conn, drive.job.id)
        )
    if not passed:
        drive.move(Stage.awaiting_run_approval, Status.waiting)
        return
    drive.move(Stage.preparing_baseline)
