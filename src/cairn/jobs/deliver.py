"""Delivery: push the job branch, then merge it; each an effect recorded before and after."""

from __future__ import annotations

from collections.abc import Callable

from cairn.errors import WorkspaceError
from cairn.jobs.drive import Drive
from cairn.stages import Stage, Status
from cairn.store import effects, stage_runs
from cairn.workspace import delivery


def delivering(drive: Drive) -> None:
    """Push, then merge; an intended effect is inspected in the outside world before any repeat."""
    sha = reviewed_commit(drive)
    attempt = drive.attempt(Stage.delivering, {"commit": sha, "repo": drive.room.repo})
    try:
        _effect(drive, "push", f"job-{drive.job.id}:push:{sha}", *_push(drive, sha))
        merged, why = _merge(drive, sha)
    except _Undecidable as exc:
        attempt.reject(sha, {"pushed": "unknown"})
        drive.stop(Status.blocked, str(exc))
        return
    attempt.accept(sha, {"pushed": 1, "merged": int(merged)})
    note = None if merged else f"the branch {drive.job.branch} was delivered; {why}"
    drive.move(Stage.completed, Status.completed, diagnosis=note and drive.sanitizer.clean(note))


def reviewed_commit(drive: Drive) -> str:
    """The commit the reviewer saw; later edits to the workspace are never delivered."""
    with drive.store.begin() as conn:
        summarized = stage_runs.last_accepted(conn, drive.job.id, Stage.summarizing)
    assert summarized is not None and summarized.evidence, "review follows an accepted summary"
    return str(summarized.evidence["commit"])


class _Undecidable(Exception):
    """Inspection could not tell whether an intended effect happened; a person must look."""


def _push(drive: Drive, sha: str) -> tuple[Callable[[], str | None], Callable[[], str]]:
    def inspect() -> str | None:
        remote = delivery.remote_branch_sha(drive.room.repo, drive.job.branch)
        if remote not in (None, sha):
            raise _Undecidable(
                f"the room's repository already has {drive.job.branch} at another commit; "
                "cairn will not overwrite it. Remove that branch, then run `cairn resume`"
            )
        return sha if remote == sha else None

    def act() -> str:
        with drive.mirror.lock():
            delivery.push_branch(drive.mirror, sha, drive.job.branch)
        return sha

    return inspect, act


def _merge(drive: Drive, sha: str) -> tuple[bool, str | None]:
    key = f"job-{drive.job.id}:merge:{sha}"
    outcome: dict[str, str | None] = {}

    def inspect() -> str | None:
        with drive.mirror.lock():
            return sha if delivery.is_merged(drive.mirror, sha) else None

    def act() -> str | None:
        message = f"Merge {drive.job.branch}"
        with drive.mirror.lock():
            result = delivery.merge_into_base(drive.mirror, sha, message)
        outcome["reason"] = result.reason
        return result.commit if result.merged else None

    ref = _effect(drive, "merge", key, inspect, act)
    return ref is not None, outcome.get("reason")


def _effect(
    drive: Drive,
    kind: str,
    key: str,
    inspect: Callable[[], str | None],
    act: Callable[[], str | None],
) -> str | None:
    """Perform an effect at most once: intent first, inspection before acting, done after."""
    with drive.fenced() as conn:
        record = effects.begin(conn, drive.job.id, kind, key)
    if record.status == effects.DONE:
        return record.external_ref
    try:
        ref = inspect()
        if ref is None:
            ref = act()
    except WorkspaceError as exc:
        raise _Undecidable(
            f"{kind} did not complete: {exc}; run `cairn resume` to try again"
        ) from exc
    with drive.fenced() as conn:
        effects.mark(conn, key, effects.DONE if ref else effects.FAILED, ref)
    return ref
