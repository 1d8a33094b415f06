"""Pushing a job's branch for review on a forge: created once, then moved only by the job.

A follow-up (`cairn reply`) commits on top of the job's branch, so the branch on the forge,
and with it the job's one pull request, moves to the new commit. It moves only from a commit
this job pushed itself (each push is an effect whose external reference is its commit), and
with a lease on that commit: a branch someone else moved is never overwritten.
"""

from __future__ import annotations

from cairn.engine import perform
from cairn.jobs.drive import Drive
from cairn.jobs.ledger import StoreEffects
from cairn.store import effects as effect_ledger
from cairn.workspace import delivery
from cairn.workspace.git import transport_address


def push_for_review(drive: Drive, effects: StoreEffects, sha: str) -> str | None:
    """Put the job's branch on the forge at `sha` (an effect, reconciled by looking first)."""
    return perform(
        effects,
        "push",
        f"job-{drive.job.id}:push:{sha}",
        inspect=lambda: _at(drive, sha),
        act=lambda: _push(drive, sha),
        faults=drive.faults,
    )


def _remote_sha(drive: Drive) -> str | None:
    mirror = drive.mirror
    return delivery.remote_branch_sha(
        drive.room.repo, drive.branch, timeout=mirror.git_timeout, credential=mirror.credential
    )


def _own_pushes(drive: Drive) -> set[str]:
    with drive.store.read() as conn:
        found = effect_ledger.for_job(conn, drive.job.id)
    return {e.external_ref for e in found if e.kind == "push" and e.external_ref}


def _at(drive: Drive, sha: str) -> str | None:
    """`sha` if the branch is there already; None if it is absent or at this job's own
    earlier commit; BranchTaken if anyone else's commit holds it."""
    remote = _remote_sha(drive)
    if remote == sha:
        return sha
    if remote is None or remote in _own_pushes(drive):
        return None
    raise delivery.BranchTaken(
        f"the branch {drive.branch} on the forge is at a commit this job never pushed; cairn "
        "neither adopts nor overwrites it"
    )


def _push(drive: Drive, sha: str) -> str:
    remote = _remote_sha(drive)
    if remote is None:
        with drive.mirror.lock():
            delivery.push_branch(drive.mirror, sha, drive.branch)
        return sha
    ref = f"refs/heads/{drive.branch}"
    with drive.mirror.lock():
        # Leased on the job's own earlier commit (checked by `_at` just before).
        drive.mirror.remote_git(
            "push", "--quiet", "--no-verify", f"--force-with-lease={ref}:{remote}",
            "--", transport_address(drive.room.repo), f"{sha}:{ref}",
            failure=f"git could not move branch {drive.branch} on the forge to the new commit",
            cwd=drive.mirror.path, timeout=drive.mirror.git_timeout,
        )  # fmt: skip
    return sha
