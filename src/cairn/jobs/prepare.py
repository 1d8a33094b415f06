"""Preparing a job: the baseline and the job's own worktree (engine stages)."""

from __future__ import annotations

from cairn.engine import Evidence, Expect, Measurement, Result, RunRecord, StageDef, digest
from cairn.errors import WorkspaceError
from cairn.jobs.drive import Blocked, Drive
from cairn.stages import Stage
from cairn.workspace.mirror import checkout_changes


def _baseline(drive: Drive) -> Result:
    """Fetch the authoritative base branch now; never clean someone's uncommitted work."""
    room = drive.room
    changes = checkout_changes(room.repo, room.base_branch)
    if changes:
        shown = ", ".join(changes[:5]) + (
            f" and {len(changes) - 5} more" if len(changes) > 5 else ""
        )
        raise Blocked(
            f"the repository's checkout of {room.base_branch} has uncommitted changes ({shown}); "
            "cairn did not touch them. Commit or stash them, then run "
            f"`cairn resume {drive.job.id}`",
            Evidence.of(Measurement("uncommitted_paths", len(changes))),
        )
    try:
        with drive.mirror.lock():
            baseline = drive.mirror.fetch_baseline()
    except WorkspaceError as exc:
        raise Blocked(
            f"{exc}; fix the room's repository, then run `cairn resume {drive.job.id}`"
        ) from exc
    drive.record(baseline=baseline)
    return Result(
        baseline,
        Evidence.of(
            Measurement("fetched", True, Expect.equals, True), Measurement("baseline", baseline)
        ),
    )


def _baseline_now(drive: Drive, prior: RunRecord) -> str | None:
    """The recorded baseline stands while the job names it and the mirror still holds it."""
    if drive.job.baseline != prior.content_id or prior.content_id is None:
        return None
    try:
        drive.mirror.git("cat-file", "-e", f"{prior.content_id}^{{commit}}")
    except WorkspaceError:
        return None
    return prior.content_id


def _workspace_identity(drive: Drive) -> str:
    return digest({"branch": drive.branch, "baseline": drive.job.baseline})


def _workspace(drive: Drive) -> Result:
    """Create (or, on resume, reuse untouched) the job's own worktree at the baseline."""
    assert drive.job.baseline is not None, "the baseline stage records it"
    with drive.mirror.lock():
        drive.worktree.ensure(drive.job.baseline)
    return Result(
        _workspace_identity(drive),
        Evidence.of(Measurement("worktree_valid", drive.worktree.is_valid(), Expect.equals, True)),
    )


def _workspace_now(drive: Drive, prior: RunRecord) -> str | None:
    # The workspace stage's product is "this job's worktree, rooted at its baseline"; the
    # files in it are the agent stage's product and are checked there.
    return _workspace_identity(drive) if drive.worktree.is_valid() else None


BASELINE: StageDef[Drive] = StageDef(
    name=Stage.preparing_baseline.value,
    run=_baseline,
    inputs=lambda drive: {"repo": drive.room.repo, "branch": drive.room.base_branch},
    required=("fetched",),
    content_now=_baseline_now,
)
WORKSPACE: StageDef[Drive] = StageDef(
    name=Stage.preparing_workspace.value,
    run=_workspace,
    inputs=lambda drive: {"branch": drive.branch},
    required=("worktree_valid",),
    content_now=_workspace_now,
)
