"""Preparing a job: the baseline and the job's own worktree (engine stages)."""

from __future__ import annotations

from cairn.canonical import digest
from cairn.engine import Evidence, Expect, Measurement, Result, RunRecord, StageDef
from cairn.engine.workflow import Upstream
from cairn.errors import WorkspaceError
from cairn.jobs.drive import Blocked, Drive
from cairn.jobs.fresh_baseline import REPOSITORY_CAUSE
from cairn.next_action import Action, NextAction
from cairn.stages import Stage
from cairn.workspace.base_checkout import stopped_git_advice
from cairn.workspace.git import IDENTITY, try_git
from cairn.workspace.mirror import checkout_changes

NEW_WORKTREE = "new_worktree"
"""Evidence of the workspace stage: the worktree was made by this run, on a new branch."""


def _baseline(drive: Drive, upstream: Upstream) -> Result:
    """Fetch the authoritative base branch now; never clean someone's uncommitted work."""
    room = drive.room
    changes = checkout_changes(room.repo, room.base_branch)
    if changes:
        # Another job of this host may be fast-forwarding the checkout right now (under the
        # mirror's lock): the files it is writing are nobody's uncommitted work. Look again
        # once it is done.
        with drive.mirror.lock():
            changes = checkout_changes(room.repo, room.base_branch)
    if changes:
        shown = ", ".join(changes[:5]) + (
            f" and {len(changes) - 5} more" if len(changes) > 5 else ""
        )
        advice = stopped_git_advice(room.repo, room.base_branch)
        raise Blocked(
            f"the repository's checkout of {room.base_branch} has uncommitted changes ({shown}); "
            "cairn did not touch them. "
            + (f"{advice}, then resume" if advice else "Commit or stash them"),
            Evidence.of(Measurement("uncommitted_paths", len(changes))),
            next_actions=[drive.resume_step()],
        )
    try:
        baseline = drive.mirror.fetch_baseline()
    except WorkspaceError as exc:
        raise Blocked(
            f"{exc}; fix the room's repository", next_actions=[drive.resume_step()]
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


def _workspace(drive: Drive, upstream: Upstream) -> Result:
    """Create (or, on resume, reuse) the job's own worktree at the baseline."""
    baseline = drive.job.baseline
    assert baseline is not None, "the baseline stage records it"
    with drive.mirror.lock():
        new = drive.worktree.ensure(baseline)
        # A worktree made now on a new branch is the baseline's checkout: nothing to move.
        moved = () if new else _onto_baseline(drive, baseline)
    valid = Measurement("worktree_valid", drive.worktree.is_valid(), Expect.equals, True)
    made = Measurement(NEW_WORKTREE, new)
    return Result(_workspace_identity(drive), Evidence.of(valid, made, *moved))


def _onto_baseline(drive: Drive, baseline: str) -> tuple[Measurement, ...]:
    """Move a workspace made from an older baseline onto `baseline`, the job's work with it.

    This happens after a fresh baseline (see `fresh_baseline`). The job's changes, committed
    or not, are merged onto the new baseline by git's three-way merge; nothing is discarded.
    When they conflict with what the base branch changed, the job is blocked and the
    workspace is left exactly as it was.
    """
    worktree = drive.worktree
    head = worktree.head()
    if try_git("merge-base", "--is-ancestor", baseline, head, cwd=drive.mirror.path)[0] == 0:
        return ()  # already on the baseline (the job's own commits, if any, sit on top of it)
    work = worktree.git(
        *IDENTITY, "commit-tree", worktree.content_id(), "-p", head, "-F", "-",
        input=f"{drive.branch}: its work before a fresh baseline",
    )  # fmt: skip
    merged = try_git(
        "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", baseline, work,
        cwd=drive.mirror.path,
    )  # fmt: skip
    if merged.returncode not in (0, 1) or not merged.stdout:
        raise WorkspaceError("git could not merge the job's work onto the new baseline")
    tree, *conflicts = [part for part in merged.stdout.split("\0") if part]
    if merged.returncode == 1:
        raise _conflict(drive, conflicts)
    failure = "git could not move the job's workspace onto the new baseline"
    worktree.git("update-ref", "-m", "cairn: fresh baseline", worktree.branch_ref, baseline, head)
    worktree.git("read-tree", "--reset", "-u", tree, failure=failure)
    worktree.git("reset", "--quiet", "--mixed", "HEAD", failure=failure)
    carried = worktree.changed_files(baseline, tree)
    return (
        Measurement("fresh_baseline_from", head),
        # Noted, not required: a file the new baseline ignores is kept but no longer counted.
        Measurement("work_carried_over", worktree.content_id() == tree),
        Measurement("files_carried_over", len(carried)),
    )


def _conflict(drive: Drive, paths: list[str]) -> Blocked:
    job = drive.job.id
    conflicting = Measurement("conflicting_paths", len(paths), Expect.equals, 0)
    return Blocked(
        f"the job's changes conflict with the new baseline of {drive.room.base_branch} "
        f"({', '.join(paths[:5]) or 'files git could not merge'}); its workspace was left as "
        "it was; resumed, it tries again on a fresh baseline, cancelled and retried, it starts "
        f"anew. Change {drive.room.base_branch} so that the job's changes apply",
        # The base branch decides whether the work applies: a resume fetches it again.
        Evidence.of(REPOSITORY_CAUSE, conflicting),
        next_actions=[
            drive.resume_step(),
            NextAction(Action.cancel, job=job),
            NextAction(Action.retry, job=job),
        ],
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
