"""The run gate: nothing runs until group policy or a person other than the requester approves."""

from __future__ import annotations

from cairn.jobs.drive import Drive
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions
from cairn.store import jobs as job_ledger


def queued(drive: Drive) -> None:
    """A new job meets the run gate: policy may approve it; otherwise a person must."""
    policy = drive.group.policy.get("run_approval", "admin")
    if policy != "auto":
        drive.move(Stage.awaiting_run_approval, Status.waiting)
        return
    with drive.fenced() as conn:
        decisions.append(
            conn,
            job_id=drive.job.id,
            gate=Gate.run,
            verdict=Verdict.auto,
            actor="policy",
            policy=f"group {drive.group.name}: run_approval=auto",
        )
        drive.job = job_ledger.transition(
            conn, drive.job, Stage.awaiting_run_approval, Status.running
        )
    drive.move(Stage.preparing_baseline)


def run_approved(drive: Drive) -> None:
    """A person approved the run (the gate decision made the job runnable again)."""
    drive.move(Stage.preparing_baseline)
