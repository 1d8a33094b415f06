"""Delivery as a pull request: one per job, whatever crashes, adopted rather than repeated.

In the two pull-request modes the job's branch is pushed and its pull request opened as a
draft when the job reaches `awaiting_review` (`publish_for_review`), so the reviewer reviews
the pull request itself. Approval then marks it ready (`pull_request`) or merges it through
the forge's API (`pull_request_and_merge`); a rejection closes it (`forge_reject`). A
follow-up moves the same branch, so the same pull request shows the new commit.

Opening the pull request is an effect like a push: intended before, done after, with the
PR's number as its external reference. Before an intended open is repeated, the forge is
asked for the pull requests of the job's branch and of the job's key line (carried in every
body cairn writes, naming the installation as well as the job: job ids restart in every
store, and two installations may deliver to one repository). Only a pull request from this
installation's branch of the job that carries that exact line is adopted. A pull request
someone closed by hand is never reopened: the job blocks and says so.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa

from cairn.engine import Measurement, perform
from cairn.engine.evidence import Expect
from cairn.errors import ForgeError
from cairn.forges import Delivery, Forge, ForgeSettings, PullAction, PullRequest, PullState
from cairn.forges.base import carries_line
from cairn.jobs.drive import Blocked, Drive
from cairn.jobs.ledger import StoreEffects


def pull_request_key(drive: Drive) -> str:
    """The job's one pull request's effect key in the ledger: by job, so a follow-up updates
    it. The ledger is the installation's own, so the job id is enough there."""
    return pull_request_key_of(drive.job.id)


def pull_request_key_of(job_id: int) -> str:
    """`pull_request_key` for a job known by its id alone (gates, `cairn show`)."""
    return f"job-{job_id}:pull_request"


def pull_request_marker(drive: Drive) -> str:
    """The line every body cairn writes carries: the job and its installation, so that
    another installation's job of the same id never adopts this pull request."""
    return pull_request_marker_of(drive.job.id, drive.store.installation_id)


def pull_request_marker_of(job_id: int, installation_id: str) -> str:
    """`pull_request_marker` for a job known by its id (closing it on a cancel)."""
    return f"cairn job {job_id} of installation {installation_id}"


def _legacy_marker(drive: Drive) -> str:
    """The line bodies written before the installation was named carry (the ledger key)."""
    return f"cairn job {drive.job.id} · key: {pull_request_key(drive)}"


def is_pull_request_room(drive: Drive) -> bool:
    """Whether the job's room delivers by pull request (so review happens on one)."""
    from cairn.jobs.deliver import delivery_mode

    return delivery_mode(drive) != Delivery.push_and_merge


def publish_for_review(drive: Drive, sha: str) -> int:
    """Push the job's branch at `sha` and open (or adopt) its draft pull request, so the
    reviewer reviews the pull request itself; Blocked if the forge refuses or it was closed."""
    from cairn.jobs.review_push import push_for_review

    effects = StoreEffects(drive.store, drive.job.id, drive.token)
    forge = forge_of(drive)
    try:
        push_for_review(drive, effects, sha)
        number = _opened(drive, effects, forge, draft=True)
        _require_open(drive, forge.get_pull_request(number))
    except ForgeError as exc:
        raise Blocked(
            f"the pull request for review could not be published: {exc}",
            next_actions=[drive.resume_step()],
        ) from None
    return number


def deliver_by_pull_request(
    drive: Drive, effects: StoreEffects, mode: Delivery, sha: str
) -> tuple[Measurement, ...]:
    """Adopt the job's pull request (opened at review), then mark it ready for review or, in
    pull_request_and_merge, merge it through the forge (branch protection decides) while its
    head is still `sha`, the commit that was approved."""
    forge = forge_of(drive)
    key = pull_request_key(drive)
    try:
        number = _opened(drive, effects, forge, draft=False)
        _require_approved_head(drive, forge.get_pull_request(number), sha)
        ready = perform(
            effects, "pull_request_ready", f"{key}:ready",
            inspect=lambda: _ready(forge, number),
            act=lambda: _mark_ready(forge, number),
            faults=drive.faults,
        )  # fmt: skip
        if mode != Delivery.pull_request_and_merge:
            return (
                Measurement("pull_request", 1, Expect.equals, 1),
                Measurement("ready", int(ready is not None), Expect.equals, 1),
            )
        merged = perform(
            effects, "forge_merge", f"{key}:merge",
            inspect=lambda: _merged(forge, number),
            act=lambda: _merge(forge, number, sha),
            faults=drive.faults,
        )  # fmt: skip
    except ForgeError as exc:
        raise Blocked(
            f"delivery did not complete: {exc}", next_actions=[drive.resume_step()]
        ) from None
    return (
        Measurement("pull_request", 1, Expect.equals, 1),
        Measurement("merged", int(merged is not None), Expect.equals, 1),
    )


def _opened(drive: Drive, effects: StoreEffects, forge: Forge, *, draft: bool) -> int:
    """The number of the job's one pull request: recorded, adopted, or opened now."""
    opened = perform(
        effects, "pull_request", pull_request_key(drive),
        inspect=lambda: _adopt(drive, forge),
        act=lambda: _open(drive, forge, draft=draft),
        faults=drive.faults,
    )  # fmt: skip
    if opened is None:
        raise ForgeError("the forge opened no pull request and gave no reason; resume to retry")
    return int(opened)


def forge_of(drive: Drive) -> Forge:
    """The forge client of the job's room, with the room's credential (never shown)."""
    from cairn.forges import get_forge
    from cairn.forges.credentials import forge_token

    settings = ForgeSettings.from_scope(drive.room.scope)
    assert settings is not None, "a pull request room has a forge (room create checks)"
    key = drive.config.secret_key.get_secret_value() if drive.config.secret_key else None
    with drive.store.read() as conn:
        token = forge_token(settings, environ=os.environ, conn=conn, secret_key=key)
    return get_forge(settings, token, timeout=drive.config.git_timeout)


def _adopt(drive: Drive, forge: Forge) -> str | None:
    """The job's pull request if the forge has it already; Blocked if it was closed by hand."""
    marker = pull_request_marker(drive)
    found = forge.find_pull_requests(drive.branch, marker)
    # The branch is named for the installation; a legacy line names the job only, so it counts
    # on this installation's branch alone.
    lines = (marker, _legacy_marker(drive))
    ours = [
        p for p in found if p.head == drive.branch and any(carries_line(p.body, m) for m in lines)
    ]
    live = [p for p in ours if p.state != PullState.closed]
    if live:
        return str(live[0].number)
    if ours:
        raise Blocked(closed_by_hand(ours[-1]), next_actions=[drive.resume_step()])
    return None


def _require_open(drive: Drive, pull: PullRequest) -> None:
    """Never reopened silently: a pull request closed without merging blocks the job."""
    if pull.state == PullState.closed:
        raise Blocked(closed_by_hand(pull), next_actions=[drive.resume_step()])


def _require_approved_head(drive: Drive, pull: PullRequest, sha: str) -> None:
    """Open, and at the approved commit: an approval is never spent on a commit someone else
    pushed onto the branch afterwards (a force-push, or a commit on top)."""
    _require_open(drive, pull)
    head = pull.head_sha
    if pull.state == PullState.open and head is not None and head != sha:
        raise Blocked(
            f"the branch of pull request #{pull.number} ({pull.url}) is at a commit this job "
            f"never pushed ({head[:12]}, not the approved {sha[:12]}); cairn neither "
            "merges nor overwrites it. Put the branch back at the approved commit and resume, "
            "or cancel the job",
            next_actions=[drive.resume_step()],
        )


def closed_by_hand(pull: PullRequest) -> str:
    """What a job whose pull request someone closed says: cairn never reopens it."""
    return (
        f"pull request #{pull.number} ({pull.url}) was closed on the forge, not by cairn; cairn "
        "never reopens it. Reopen it there and resume, or cancel the job"
    )


def _open(drive: Drive, forge: Forge, *, draft: bool) -> str:
    title = _first_line(drive.request.text)
    body = f"{drive.job.summary or title}\n\n---\n{pull_request_marker(drive)}\n"
    pull = forge.open_pull_request(drive.branch, drive.room.base_branch, title, body, draft=draft)
    return str(pull.number)


def _ready(forge: Forge, number: int) -> str | None:
    pull = forge.get_pull_request(number)
    return None if pull.draft and pull.state == PullState.open else f"#{number}"


def _mark_ready(forge: Forge, number: int) -> str | None:
    ready = forge.update(number, PullAction.ready)
    return None if ready.draft else f"#{number}"


def _merged(forge: Forge, number: int) -> str | None:
    pull = forge.get_pull_request(number)
    if pull.state == PullState.closed:
        raise ForgeError(closed_by_hand(pull))
    return f"#{number}" if pull.state == PullState.merged else None


def _merge(forge: Forge, number: int, sha: str) -> str | None:
    merged = forge.update(number, PullAction.merge, sha=sha)
    return f"#{number}" if merged.state == PullState.merged else None


def _first_line(text: str, limit: int = 72) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "cairn job")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def pull_request_view(
    conn: sa.Connection, job_id: int, *, secret_key: str | None
) -> dict[str, Any] | None:
    """The job's pull request as the forge shows it now (`cairn show`), or None if it has
    none; a forge that cannot be asked gives the number and why, never a failure."""
    from cairn.errors import CairnError
    from cairn.forges import get_forge
    from cairn.forges.credentials import forge_token
    from cairn.store import effects
    from cairn.store import jobs as job_ledger
    from cairn.store.rooms import get_room

    effect = effects.find(conn, pull_request_key_of(job_id))
    if effect is None or effect.status != "done" or not effect.external_ref:
        return None
    room = get_room(conn, job_ledger.get_job(conn, job_id).room_id)
    settings = ForgeSettings.from_scope(room.scope)
    number = int(effect.external_ref)
    if settings is None:
        return {"number": number, "error": "the room is no longer on a forge"}
    try:
        token = forge_token(settings, environ=os.environ, conn=conn, secret_key=secret_key)
        return get_forge(settings, token).get_pull_request(number).to_dict()
    except CairnError as exc:
        return {"number": number, "error": str(exc)}
