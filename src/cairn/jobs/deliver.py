"""Delivery: push the reviewed commit, then merge it (or open its pull request: deliver_forge);
each an effect recorded before and after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cairn.canonical import digest
from cairn.engine import (
    Evidence,
    Expect,
    Measurement,
    Result,
    StageDef,
    Undecidable,
    Upstream,
    perform,
)
from cairn.errors import WorkspaceError
from cairn.forges.registry import Delivery, parse_delivery
from cairn.jobs.drive import Blocked, Drive
from cairn.jobs.ledger import StoreEffects
from cairn.next_action import Action, NextAction
from cairn.stages import Stage
from cairn.workspace import delivery


def _deliver(drive: Drive, upstream: Upstream) -> Result:
    """Push, then merge; a merge left to a person blocks the job here until it is done."""
    sha = reviewed_commit(upstream)
    mode = delivery_mode(drive)
    if mode != Delivery.push_and_merge:
        return _deliver_by_pull_request(drive, sha, mode)
    reasons: list[str | None] = []
    pushed, merged = _push_and_merge(drive, sha, reasons)
    evidence = Evidence.of(
        Measurement("pushed", int(pushed == sha), Expect.equals, 1),
        Measurement("merged", int(merged is not None), Expect.equals, 1),
        Measurement("delivered", int(merged is not None), Expect.equals, 1),
    )
    if merged is None:
        why = _left_to_a_person(drive, next((r for r in reasons if r), None))
        job = drive.job.id
        steps = [drive.resume_step(), NextAction(Action.cancel, job=job)]
        raise Blocked(why, evidence, next_actions=steps)
    return Result(digest({"pushed": pushed, "merged": merged}), evidence)


def delivery_mode(drive: Drive) -> Delivery:
    """The room's delivery mode (push_and_merge for rooms from before there were others)."""
    return parse_delivery(drive.room.scope.get("delivery"))


def _deliver_by_pull_request(drive: Drive, sha: str, mode: Delivery) -> Result:
    """Push the job's branch, then open (or adopt) its one pull request on the forge."""
    from cairn.jobs.deliver_forge import deliver_by_pull_request

    effects = StoreEffects(drive.store, drive.job.id, drive.token)
    with _blocking(drive):
        pushed = _push_effect(drive, effects, sha)
    measured = deliver_by_pull_request(drive, effects, mode, sha)
    done = all(m.holds for m in measured)
    evidence = Evidence.of(
        Measurement("pushed", int(pushed == sha), Expect.equals, 1),
        *measured,
        Measurement("delivered", int(done), Expect.equals, 1),
    )
    return Result(digest({"pushed": pushed, "pull_request": [m.value for m in measured]}), evidence)


def _push_effect(drive: Drive, effects: StoreEffects, sha: str) -> str | None:
    return perform(
        effects,
        "push",
        f"job-{drive.job.id}:push:{sha}",
        inspect=lambda: _pushed(drive, sha),
        act=lambda: _push(drive, sha),
        faults=drive.faults,
    )


@contextlib.contextmanager
def _blocking(drive: Drive) -> Iterator[None]:
    """What stops an effect blocks the job, saying what to fix."""
    resume = [drive.resume_step()]
    try:
        yield
    except delivery.BranchTaken as exc:
        raise Blocked(
            f"nothing was pushed: {exc}. Rename or delete that branch there", next_actions=resume
        ) from exc
    except (Undecidable, WorkspaceError) as exc:
        raise Blocked(
            f"delivery did not complete: {exc}; fix the cause", next_actions=resume
        ) from exc


def _push_and_merge(
    drive: Drive, sha: str, reasons: list[str | None]
) -> tuple[str | None, str | None]:
    """The two effects, each recorded before and after; what stops them blocks the job."""
    effects = StoreEffects(drive.store, drive.job.id, drive.token)
    with _blocking(drive):
        pushed = _push_effect(drive, effects, sha)
        merged = perform(
            effects,
            "merge",
            f"job-{drive.job.id}:merge:{sha}",
            inspect=lambda: _merged(drive, sha),
            act=lambda: _merge(drive, sha, reasons),
            faults=drive.faults,
        )
    return pushed, merged


def _left_to_a_person(drive: Drive, why: str | None) -> str:
    """What a job whose branch is pushed but not merged says, and how it goes on."""
    # Rule 2: not a delivery. The job stays at `delivering` until the merge is done.
    return (
        f"branch {drive.branch} pushed; merge left to a person: "
        f"{why or 'cairn could not merge it'}. Resumed, cairn merges it or records your "
        "merge; cancelled, it stays unmerged. Resolve that (or merge the branch into "
        f"{drive.room.base_branch} yourself)"
    )


def reviewed_commit(upstream: Upstream) -> str:
    """The commit the reviewer saw; later edits to the workspace are never delivered."""
    commit = upstream[Stage.summarizing].content_id
    assert commit, "an accepted summary names its commit"
    return commit


def _pushed(drive: Drive, sha: str) -> str | None:
    mirror = drive.mirror
    pushed = delivery.is_pushed(
        drive.room.repo, drive.branch, sha, timeout=mirror.git_timeout, credential=mirror.credential
    )
    return sha if pushed else None


def _push(drive: Drive, sha: str) -> str:
    with drive.mirror.lock():
        delivery.push_branch(drive.mirror, sha, drive.branch)
    return sha


def _merged(drive: Drive, sha: str) -> str | None:
    with drive.mirror.lock():
        return sha if delivery.is_merged(drive.mirror, sha) else None


def _merge(drive: Drive, sha: str, reasons: list[str | None]) -> str | None:
    with drive.mirror.lock():
        result = delivery.merge_into_base(drive.mirror, sha, f"Merge {drive.branch}")
    reasons.append(result.reason)
    return result.commit if result.merged else None


def _inputs(drive: Drive) -> dict[str, str]:
    inputs = {"repo": drive.room.repo, "branch": drive.room.base_branch}
    mode = delivery_mode(drive)
    # Named only when not the default, so recipes of rooms from before modes existed hold.
    return inputs if mode == Delivery.push_and_merge else inputs | {"delivery": mode.value}


DELIVER: StageDef[Drive] = StageDef(
    name=Stage.delivering.value,
    run=_deliver,
    inputs=lambda drive: _inputs(drive),
    required=("pushed", "delivered"),
    needs=(Stage.summarizing.value,),
)
