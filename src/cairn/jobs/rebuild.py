"""Rebuilding a job's workspace on the host that now drives it, from the job's checkpoint.

A runner checks this before each pass of the workflow. When this host holds the job's
workspace (the store's holder row names it and its folder is there), nothing happens: a
crash on this host is recovered where it happened (rule 9), and a folder that is no longer a
worktree is refused by the workspace stage as before. Otherwise the workspace here (missing,
or a copy left from an earlier hold that another host has moved on from) is stale: it is
replaced by one rebuilt from the latest checkpoint (a fresh worktree from the room's mirror at
the checkpoint's baseline, the bundle unbundled, its commit checked out), and the rebuilt
tree must have the checkpoint's content identity, or nothing runs. The agent's context is
rolled back to the checkpoint's position in the same fenced transaction that makes this host
the holder, so the context never says more was done than the workspace holds: whatever the
lost host did after its last checkpoint is redone by the stage that did it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from cairn.errors import WorkspaceError
from cairn.jobs.checkpoints import checkpoint_ref, host_of
from cairn.next_action import Action, NextAction
from cairn.stages import Stage
from cairn.store import checkpoints as checkpoint_ledger
from cairn.store import contexts, workspace_hosts
from cairn.store.checkpoints import Checkpoint
from cairn.store.schema import context_steps
from cairn.store.store import lease_lost
from cairn.workspace.git import try_git

if TYPE_CHECKING:
    from cairn.jobs.drive import Drive


def ensure_workspace_here(drive: Drive) -> Checkpoint | None:
    """Make this host the holder of the job's workspace; the checkpoint rebuilt from, if any."""
    here = host_of(drive.config)
    with drive.store.read() as conn:
        held_by = workspace_hosts.holder(conn, drive.job.id)
        latest = checkpoint_ledger.latest(conn, drive.job.id, bundle=False)
    # Without the locks of a git that a crash on this host killed (in the job's workspace, or
    # on its refs before the workspace was made): they would stop every git call there.
    own_refs = (checkpoint_ref(drive.job.id),)
    drive.worktree.clear_stale_locks(
        drive.config.lease_seconds, refs=own_refs, stop=drive.stop_requested
    )
    drive.worktree.drop_dead_measurements()  # and the indexes a killed runner measured in
    if held_by == here and os.path.lexists(drive.worktree.path):
        return None  # this host's own workspace, whatever state a crash left it in (rule 9)
    if held_by is None and latest is None:  # a job new to every host: this one makes it
        if drive.job.stage is Stage.awaiting_run_approval:
            # Just past the run gate: the first stage that runs moves the job out of it, and
            # before it makes any workspace; this host is made the holder in that move.
            drive.hold_with_next_move(here)
        else:
            with drive.fenced() as conn:
                workspace_hosts.hold(conn, drive.job.id, here)
        return None
    with drive.mirror.lock():
        drive.worktree.remove()  # this host's copy is older than the job's latest state
        if latest is not None:
            with drive.store.read() as conn:
                latest = checkpoint_ledger.latest(conn, drive.job.id)
            if latest is None:  # the job ended meanwhile, and `cairn gc` dropped them
                raise lease_lost(drive.job.id)
            _rebuild(drive, latest)
    with drive.fenced() as conn:
        roll_back_context(conn, drive.job.id, drive.agent_name, latest)
        workspace_hosts.hold(conn, drive.job.id, here)
    return latest


def _rebuild(drive: Drive, checkpoint: Checkpoint) -> None:
    mirror, worktree = drive.mirror, drive.worktree
    if not _has_commit(drive, checkpoint.baseline):
        mirror.fetch_baseline()
    if not _has_commit(drive, checkpoint.baseline):
        raise _refused(
            drive,
            f"the room's repository no longer holds the baseline of job {drive.job.id}'s "
            "checkpoint, so its workspace cannot be rebuilt on this host",
        )
    failure = "git could not rebuild the job's workspace from its checkpoint"
    with tempfile.TemporaryDirectory(prefix="cairn-checkpoint-") as scratch:
        path = Path(scratch) / "checkpoint.bundle"
        path.write_bytes(checkpoint.bundle)
        mirror.git("bundle", "unbundle", str(path), failure=failure)
    # The ref holds the checkpoint's commit while the workspace is rebuilt from it, and goes
    # after: a mirror's refs would otherwise grow with every job it ever rebuilt.
    ref = checkpoint_ref(drive.job.id)
    mirror.git("update-ref", ref, checkpoint.commit, failure=failure)
    try:
        if mirror.git("rev-parse", f"{checkpoint.commit}^{{tree}}") != checkpoint.tree:
            raise _refused(drive, "the job's checkpoint does not hold the tree it names")
        mirror.git(
            "update-ref", "-m", "cairn: rebuilt from a checkpoint", worktree.branch_ref,
            checkpoint.head, failure=failure,
        )  # fmt: skip
        worktree.ensure(checkpoint.baseline)
        if checkpoint.commit != checkpoint.head:
            # The files the agent left uncommitted: in the worktree, not on the branch.
            worktree.git("read-tree", "--reset", "-u", checkpoint.tree, failure=failure)
            worktree.git("reset", "--quiet", "--mixed", "HEAD", failure=failure)
    finally:
        mirror.delete_ref(ref, checkpoint.commit, failure=failure)
    rebuilt = worktree.content_id()
    if rebuilt != checkpoint.tree:
        raise _refused(
            drive,
            "the workspace rebuilt from the job's checkpoint is not the one "
            "the checkpoint recorded",
        )


def _has_commit(drive: Drive, sha: str) -> bool:
    if not drive.mirror.exists():
        return False
    return try_git("cat-file", "-e", f"{sha}^{{commit}}", cwd=drive.mirror.path).returncode == 0


def _refused(drive: Drive, why: str) -> WorkspaceError:
    job = drive.job.id
    return WorkspaceError(
        f"{why}; nothing was run on a workspace that might differ. Retry the job to start it "
        "anew, or cancel it",
        next_actions=[NextAction(Action.retry, job=job), NextAction(Action.cancel, job=job)],
    )


def roll_back_context(
    conn: sa.Connection, job_id: int, agent: str, checkpoint: Checkpoint | None
) -> None:
    """Put the agent's context back where it was when `checkpoint` was taken (None: before
    any agent step). A person's messages and cairn's notes posted since are kept."""
    current = contexts.load(conn, job_id)
    if current is not None:
        saved: dict[str, Any] = dict(checkpoint.context_state or {}) if checkpoint else {}
        state = dict(current)
        state["agent"] = saved.get("agent")
        state["outcome"] = saved.get("outcome")
        for kept in ("inbox", "follow_ups"):
            earlier = [item for item in saved.get(kept, []) if item not in current.get(kept, [])]
            state[kept] = [*earlier, *current.get(kept, [])]
        contexts.save(conn, job_id, agent, state)
    mine = context_steps.c.job_id == job_id
    if _conversation_continues(conn, job_id, checkpoint):
        assert checkpoint is not None
        mine = sa.and_(mine, context_steps.c.seq > checkpoint.context_seq)
    conn.execute(sa.delete(context_steps).where(mine))


def _conversation_continues(
    conn: sa.Connection, job_id: int, checkpoint: Checkpoint | None
) -> bool:
    """Whether the checkpoint's last step is still the job's step there: a conversation
    replaced since (`reply --fresh`) shares no steps with the checkpoint."""
    if checkpoint is None or checkpoint.context_step_id is None:
        return False
    step = conn.execute(
        sa.select(context_steps.c.id, context_steps.c.at).where(
            context_steps.c.job_id == job_id, context_steps.c.seq == checkpoint.context_seq
        )
    ).first()
    return step is not None and (step.id, step.at) == (
        checkpoint.context_step_id,
        checkpoint.context_step_at,
    )
