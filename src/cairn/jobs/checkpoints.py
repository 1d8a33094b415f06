"""Checkpoints: after each accepted stage that changed the workspace (or moved the agent's
context on), store what rebuilds it.

Where they live: in the store's `checkpoints` ledger, not in a ref of the room's mirror. The
store is the one thing every runner host shares; a mirror is per host, and a ref pushed to
the room's repository would put cairn's half-reviewed work where people (and forges) see it,
before any approval (rule 2). A bundle holds only the job's commits on top of its baseline,
which every host fetches anyway, so a checkpoint costs about the size of the job's own change.

What one holds: the job branch's head, and when the workspace also holds files not yet
committed (the agent's result before `summarizing` commits it), a commit on top of the head
carrying exactly the workspace's content identity. The rebuilt workspace must reproduce that
tree id, or the rebuild is refused. That commit has the message of the job's own commit:
when the same runner summarizes the workspace still holding it, that very commit goes on the
branch, and the checkpoint after it stores the bundle already made instead of packing it
again. Summarizing after a crash or on another host writes a commit of its own.

Context and workspace: the agent's context is saved after every agent step, the workspace
only here. Each checkpoint records the context's position in the same transaction (the
agent's state and the last conversation step), and a host that rebuilds the workspace from a
checkpoint rolls the context back to that position (`rebuild`). Rolling back was chosen over
checkpointing the workspace at every context save: a bundle and a tree hash per model step
would multiply an agent turn's cost by the size of the workspace, and the work after the
checkpoint is lost with its host anyway, so it must be redone by the stage that produced it.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from cairn.canonical import digest
from cairn.config import Config
from cairn.engine import RunRecord
from cairn.jobs.prepare import NEW_WORKTREE
from cairn.stages import Stage
from cairn.store import checkpoints as checkpoint_ledger
from cairn.store import context_steps, contexts
from cairn.store.checkpoints import Checkpoint

if TYPE_CHECKING:
    from cairn.jobs.drive import Drive

CHANGING_STAGES = frozenset(
    {Stage.preparing_workspace.value, Stage.running_agent.value, Stage.summarizing.value}
)
"""The stages whose accepted result may differ from the workspace before them."""


def host_of(config: Config) -> str:
    """This host's name among runner hosts: two homes on one machine are two hosts."""
    return f"{socket.gethostname()[:200]}#{digest(str(config.workspaces_dir))[:8]}"


def checkpoint_ref(job_id: int) -> str:
    """The name of a checkpoint's commit in its bundle, and the mirror ref that holds it while a
    workspace is rebuilt from it."""
    return f"refs/cairn/checkpoints/job-{job_id}"


def after_accepted(drive: Drive, stage: str, run: RunRecord) -> Checkpoint | None:
    """The checkpoint after an accepted stage of CHANGING_STAGES, from what its run measured.

    Each run names what it produced, measured a moment ago with nothing run in the workspace
    since: the agent's result (its content identity is the workspace's tree), and the commit
    of the summary with its tree. A worktree the workspace stage has just made on a new
    branch holds only the baseline's checkout, which any host makes the same way.
    """
    if stage == Stage.preparing_workspace.value:
        return save_if_changed(drive, stage, new_worktree=run.evidence.get(NEW_WORKTREE) is True)
    if stage == Stage.running_agent.value:
        return save_if_changed(drive, stage, tree=run.content_id)
    commit, tree = run.content_id, run.evidence.get_str("tree")
    if stage == Stage.summarizing.value and commit and tree:
        return save_if_changed(drive, stage, tip=(commit, tree), tree=tree)
    return save_if_changed(drive, stage)


def save_if_changed(
    drive: Drive,
    stage: str,
    *,
    tip: tuple[str, str] | None = None,
    tree: str | None = None,
    new_worktree: bool = False,
) -> Checkpoint | None:
    """Checkpoint the workspace and the context's position, unless the latest checkpoint (or
    the baseline, before any agent step) already holds both.

    A turn that changed nothing in the workspace may still have moved the context on (an
    agent that asked for a dependency first): that position is checkpointed too, or another
    host would roll the context back past a conversation its workspace agrees with. A caller
    that knows the branch's `tip` (commit and its tree) or the workspace's `tree` passes them.
    """
    worktree, baseline = drive.worktree, drive.job.baseline
    if baseline is None or not worktree.is_valid():
        return None
    with drive.store.read() as conn:
        last = checkpoint_ledger.latest(conn, drive.job.id, bundle=False)
        state = contexts.load(conn, drive.job.id)
        step = context_steps.last_step(conn, drive.job.id)
    position = (state, step.id if step else None, step.at if step else None)
    if new_worktree and last is None and position == (None, None, None):
        return None  # nothing of the job's own to carry to another host yet
    head, head_tree = tip or worktree.tip()
    tree = tree or worktree.content_id()
    if (
        last is not None
        and (last.baseline, last.head, last.tree) == (baseline, head, tree)
        and (last.context_state, last.context_step_id, last.context_step_at) == position
    ):
        return None
    if last is None and position == (None, None, None) and head == baseline and tree == head_tree:
        return None  # nothing of the job's own to carry to another host yet
    commit, bundle = _bundle(drive, baseline, head, head_tree == tree, tree)
    with drive.fenced() as conn:
        # The context's position, read in the transaction that stores the workspace's.
        state = contexts.load(conn, drive.job.id)
        step = context_steps.last_step(conn, drive.job.id)
        return checkpoint_ledger.add(
            conn,
            drive.job.id,
            stage=stage,
            baseline=baseline,
            head=head,
            commit=commit,
            tree=tree,
            bundle=bundle,
            context_state=state,
            context_seq=step.seq if step else 0,
            context_step_id=step.id if step else None,
            context_step_at=step.at if step else None,
            host=host_of(drive.config),
            fencing_token=drive.token,
        )


def _bundle(drive: Drive, baseline: str, head: str, holds: bool, tree: str) -> tuple[str, bytes]:
    """The commit that holds `tree` on top of `head`, and a bundle of it relative to baseline.

    `holds`: the commit `head` (the tip of the job's branch) already has `tree` as its tree.
    The commit made for files not yet committed is named by no ref: the bundle is written
    from its id (so a mirror's refs do not grow with every job it ever checkpointed, and no
    ref is left behind by a crash).
    """
    failure = "git could not write a checkpoint of the job's workspace"
    # A bundle needs at least one commit beyond the baseline, even for a reverted workspace.
    if head != baseline and holds:
        commit = head
    else:
        # With the message of the job's commit: summarizing puts this very commit on the
        # branch when the workspace still holds `tree` on `head` (`Worktree.commit_object`).
        commit = drive.worktree.commit_object(tree, head, drive.commit_message)
    return commit, drive.worktree.bundle(
        commit, baseline, checkpoint_ref(drive.job.id), failure=failure
    )
