"""Delivery: push the reviewed commit, then merge it; each an effect recorded before and after."""

from __future__ import annotations

from cairn.engine import (
    Evidence,
    Expect,
    Measurement,
    Result,
    StageDef,
    Undecidable,
    digest,
    perform,
)
from cairn.errors import WorkspaceError
from cairn.jobs.drive import Blocked, Drive
from cairn.jobs.ledger import StoreEffects
from cairn.stages import Stage
from cairn.store import stage_runs
from cairn.workspace import delivery


def _deliver(drive: Drive) -> Result:
    """Push, then merge; the job completes with a note when the merge is left to a person."""
    sha = reviewed_commit(drive)
    effects = StoreEffects(drive.store, drive.job.id, drive.token)
    try:
        pushed = perform(
            effects,
            "push",
            f"job-{drive.job.id}:push:{sha}",
            inspect=lambda: _pushed(drive, sha),
            act=lambda: _push(drive, sha),
            faults=drive.faults,
        )
        reasons: list[str | None] = []
        merged = perform(
            effects,
            "merge",
            f"job-{drive.job.id}:merge:{sha}",
            inspect=lambda: _merged(drive, sha),
            act=lambda: _merge(drive, sha, reasons),
            faults=drive.faults,
        )
    except (Undecidable, WorkspaceError) as exc:
        raise Blocked(
            f"delivery did not complete: {exc}; run `cairn resume {drive.job.id}`"
        ) from exc
    if merged is None:
        why = next((r for r in reasons if r), "the merge was left to a person")
        drive.completion_note = f"the branch {drive.job.branch} was delivered; {why}"
    return Result(
        digest({"pushed": pushed, "merged": merged}),
        Evidence.of(
            Measurement("pushed", int(pushed == sha), Expect.equals, 1),
            Measurement("merged", int(merged is not None)),
        ),
    )


def reviewed_commit(drive: Drive) -> str:
    """The commit the reviewer saw; later edits to the workspace are never delivered."""
    with drive.store.begin() as conn:
        summarized = stage_runs.last_accepted(conn, drive.job.id, Stage.summarizing)
    assert summarized is not None and summarized.content_id, "review follows an accepted summary"
    return summarized.content_id


def _pushed(drive: Drive, sha: str) -> str | None:
    remote = delivery.remote_branch_sha(
        drive.room.repo, drive.job.branch, timeout=drive.mirror.git_timeout
    )
    if remote not in (None, sha):
        raise Undecidable(
            f"the room's repository already has {drive.job.branch} at another commit and cairn "
            "will not overwrite it; remove that branch there"
        )
    return sha if remote == sha else None


def _push(drive: Drive, sha: str) -> str:
    with drive.mirror.lock():
        delivery.push_branch(drive.mirror, sha, drive.job.branch)
    return sha


def _merged(drive: Drive, sha: str) -> str | None:
    with drive.mirror.lock():
        return sha if delivery.is_merged(drive.mirror, sha) else None


def _merge(drive: Drive, sha: str, reasons: list[str | None]) -> str | None:
    with drive.mirror.lock():
        result = delivery.merge_into_base(drive.mirror, sha, f"Merge {drive.job.branch}")
    reasons.append(result.reason)
    return result.commit if result.merged else None


DELIVER: StageDef[Drive] = StageDef(
    name=Stage.delivering.value,
    run=_deliver,
    inputs=lambda drive: {"repo": drive.room.repo, "branch": drive.room.base_branch},
    required=("pushed",),
)
