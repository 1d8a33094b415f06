"""Preparing a job: the baseline, the job's own worktree, its dependencies."""

from __future__ import annotations

from cairn.errors import WorkspaceError
from cairn.jobs.drive import Drive
from cairn.stages import Stage, Status
from cairn.workspace.mirror import checkout_changes


def preparing_baseline(drive: Drive) -> None:
    """Fetch the authoritative base branch; never clean someone's uncommitted work."""
    room = drive.room
    attempt = drive.attempt(
        Stage.preparing_baseline, {"repo": room.repo, "branch": room.base_branch}
    )
    changes = checkout_changes(room.repo, room.base_branch)
    if changes:
        attempt.reject(None, {"uncommitted_paths": len(changes)})
        drive.stop(Status.blocked, _dirty_diagnosis(room.base_branch, changes))
        return
    try:
        with drive.mirror.lock():
            baseline = drive.mirror.fetch_baseline()
    except WorkspaceError as exc:
        attempt.reject(None, {"fetched": False})
        drive.stop(Status.blocked, f"{exc}; fix the room's repository and run `cairn resume`")
        return
    attempt.accept(baseline, {"fetched": True, "baseline": baseline})
    drive.move(Stage.preparing_workspace, baseline=baseline)


def _dirty_diagnosis(branch: str, changes: list[str]) -> str:
    shown = ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else "")
    return (
        f"the repository's checkout of {branch} has uncommitted changes ({shown}); cairn "
        "did not touch them. Commit or stash them, then run `cairn resume`"
    )


def preparing_workspace(drive: Drive) -> None:
    """Create (or, on resume, reuse untouched) the job's own worktree at the baseline."""
    baseline = drive.job.baseline
    assert baseline is not None, "the baseline stage records it"
    attempt = drive.attempt(
        Stage.preparing_workspace, {"baseline": baseline, "branch": drive.job.branch}
    )
    with drive.mirror.lock():
        drive.worktree.ensure(baseline)
    attempt.accept(drive.worktree.content_id(), {"worktree": "ready"})
    drive.move(Stage.preparing_dependencies)


def preparing_dependencies(drive: Drive) -> None:
    """No dependency inputs are materialized yet; the stage records that it found none to do."""
    attempt = drive.attempt(Stage.preparing_dependencies, {"tree": drive.worktree.content_id()})
    attempt.accept(None, {"packages_materialized": 0, "packages_locked": 0})
    drive.move(Stage.running_agent)
