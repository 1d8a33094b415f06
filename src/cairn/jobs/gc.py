"""`cairn gc`: remove what ended jobs left behind, and nothing anyone still needs.

Removed: the workspaces of ended jobs (their branches stay in cairn's mirror) and their
checkpoints in the store (nothing can resume an ended job), stale worktree
entries and loose objects of cairn's own mirrors (`git gc` keeps its two-week grace, so an
object a runner is about to use is never pruned under it). Rooms are never deleted, so no
mirror is ever orphaned. The room's repository is touched only with `branches=True`, and then
only to delete job branches cairn itself pushed (a done push effect), still at the pushed
commit and merged into the base branch; each deletion is an effect recorded before and after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cairn.config import Config
from cairn.engine import EffectState, EffectStatus, perform
from cairn.store import Store, effects
from cairn.store import checkpoints as checkpoint_ledger
from cairn.store import jobs as job_ledger
from cairn.store.records import Job, Room
from cairn.store.rooms import list_rooms
from cairn.workspace import pushed_branches
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

DELETE_BRANCH = "delete_branch"


@dataclass
class Collected:
    """What one `cairn gc` removed and which branches it kept (with why)."""

    workspaces: list[int] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    """The jobs whose checkpoints were dropped."""
    mirrors: list[str] = field(default_factory=list)
    branches: list[dict[str, Any]] = field(default_factory=list)
    kept_branches: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspaces": self.workspaces,
            "checkpoints_dropped": self.checkpoints,
            "mirrors_pruned": self.mirrors,
            "branches_deleted": self.branches,
            "branches_kept": self.kept_branches,
        }


def collect(store: Store, config: Config, *, branches: bool = False) -> Collected:
    """Remove ended jobs' workspaces and prune mirrors; with `branches`, merged job branches."""
    with store.begin() as conn:
        rooms = {room.id: room for room in list_rooms(conn)}
        ended = [job for job in job_ledger.list_jobs(conn) if job.status.is_terminal]
    mirrors = {room_id: _mirror(store, config, room) for room_id, room in rooms.items()}
    done = Collected()
    for job in ended:
        path = config.workspace_path(store.installation_id, job.id)
        if Worktree(mirrors[job.room_id], path, job.branch_in(store.installation_id)).remove():
            done.workspaces.append(job.id)
    with store.begin() as conn:
        done.checkpoints = checkpoint_ledger.drop_ended(conn)
    for room_id, mirror in mirrors.items():
        if mirror.exists():
            prune_mirror(mirror)
            done.mirrors.append(rooms[room_id].name)
    if branches:
        for job in ended:
            _collect_branch(store, job, rooms[job.room_id], mirrors[job.room_id], done)
    return done


GC_LOCKED_FILES = (
    "packed-refs",
    "objects/info/commit-graph",
    "objects/info/commit-graphs/commit-graph-chain",
    "objects/pack/multi-pack-index",
)
"""Files of a mirror that `git gc` rewrites under a lock of its own."""


def prune_mirror(mirror: Mirror) -> None:
    """Forget removed worktrees and repack cairn's own mirror."""
    with mirror.reshaping():
        mirror.unlock_interrupted_adds()  # the entries of an add killed midway go too
        mirror.no_automatic_gc()  # for mirrors cloned before cairn set it at the clone
        mirror.git("worktree", "prune")
        for written_by_gc in GC_LOCKED_FILES:
            mirror.clear_dead_lock(written_by_gc)
        # --force: a gc.pid left by a killed gc, its pid since reused, would stop gc for
        # hours; every gc of cairn's runs under the lock held here.
        mirror.git("gc", "--quiet", "--force", failure="git could not tidy the room's mirror")


def _collect_branch(store: Store, job: Job, room: Room, mirror: Mirror, done: Collected) -> None:
    with store.begin() as conn:
        recorded = effects.for_job(conn, job.id)
    pushed = [
        e.external_ref for e in recorded if e.kind == "push" and e.status == EffectStatus.done
    ]
    deleted = any(e.kind == DELETE_BRANCH and e.status == EffectStatus.done for e in recorded)
    sha = pushed[-1] if pushed else None
    if sha is None or deleted:
        return
    branch = job.branch_in(store.installation_id)
    tip = pushed_branches.branch_tip(mirror, branch)
    if tip is None:
        return  # someone deleted it already
    seen = {"job": job.id, "room": room.name, "branch": branch}
    reason = pushed_branches.why_keep(mirror, branch, sha, tip)
    if reason is not None:
        done.kept_branches.append({**seen, "reason": reason})
        return
    ledger = _EndedJobEffects(store, job.id)
    removed = perform(
        ledger,
        DELETE_BRANCH,
        f"job-{job.id}:{DELETE_BRANCH}:{sha}",
        inspect=lambda: sha if pushed_branches.branch_tip(mirror, branch) is None else None,
        act=lambda: pushed_branches.delete_branch(mirror, branch, sha),
    )
    if removed is None:
        done.kept_branches.append({**seen, "reason": "it moved since cairn pushed it"})
    else:
        done.branches.append(seen)


class _EndedJobEffects:
    """The effect ledger of an ended job: no runner holds it, so writes are not fenced."""

    def __init__(self, store: Store, job_id: int) -> None:
        self.store, self.job_id = store, job_id

    def begin(self, kind: str, key: str) -> EffectState:
        with self.store.begin() as conn:
            effect = effects.begin(conn, self.job_id, kind, key)
        return EffectState(effect.status, effect.external_ref)

    def done(
        self, key: str, external_ref: str | None, status: EffectStatus = EffectStatus.done
    ) -> None:
        with self.store.begin() as conn:
            effects.mark(conn, key, status, external_ref)


def _mirror(store: Store, config: Config, room: Room) -> Mirror:
    path = config.mirror_path(store.installation_id, room.id)
    from cairn.jobs.drive import room_credential  # the runner's module: loaded only when used

    credential = room_credential(store, config, room)
    return Mirror(
        path, room.repo, room.base_branch, git_timeout=config.git_timeout, credential=credential
    )
