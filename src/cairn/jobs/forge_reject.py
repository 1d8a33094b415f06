"""A rejection at the integration gate closes the job's pull request, saying why; so does
cancelling a job whose pull request is open (a draft at review, or a blocked delivery).

The rejection itself is a person's decision, recorded at once (the decision ledger keeps the
reason). Closing the pull request is an effect on the forge, recorded as intended in that
same transaction and carried out by a runner (`close_rejected`), which holds the room's
credential: the person rejecting may work where the forge token is not set. A runner that
dies half-way leaves the effect intended; the next one looks at the pull request first and
closes it only if it is still open, so the reason is posted once.
"""

from __future__ import annotations

import logging
import os

import sqlalchemy as sa

from cairn.config import Config
from cairn.engine import EffectStatus
from cairn.errors import CairnError
from cairn.forges import Forge, ForgeSettings, PullAction, PullState, get_forge
from cairn.forges.base import carries_line
from cairn.jobs.deliver_forge import pull_request_key_of, pull_request_marker_of
from cairn.stages import Gate, Verdict
from cairn.store import Store, decisions
from cairn.store import effects as effect_ledger
from cairn.store import jobs as job_ledger
from cairn.store.records import Job
from cairn.store.rooms import get_room
from cairn.store.schema import effects

CLOSE = "pull_request_close"
_log = logging.getLogger("cairn.runner")


def close_key(job_id: int) -> str:
    """The effect key of closing job `job_id`'s pull request on its rejection."""
    return f"{pull_request_key_of(job_id)}:close"


def intend_close(conn: sa.Connection, job_id: int) -> bool:
    """Record the intent to close the job's pull request (if it has one): in the rejection's
    own transaction, so a recorded rejection always gets its pull request closed."""
    opened = effect_ledger.find(conn, pull_request_key_of(job_id))
    # An open that is intended but not done may have reached the forge before its runner
    # died: the closing runner looks for it there, as an adopting runner would.
    if opened is None or opened.status not in (EffectStatus.done, EffectStatus.intended):
        return False
    effect_ledger.begin(conn, job_id, CLOSE, close_key(job_id))
    return True


def closes_pull_request(conn: sa.Connection, job_id: int) -> bool:
    """Whether the job's pull request is still to be closed after its rejection."""
    effect = effect_ledger.find(conn, close_key(job_id))
    return effect is not None and effect.status == EffectStatus.intended


def close_rejected(store: Store, config: Config) -> list[int]:
    """Close the pull requests of rejected jobs that are still to be closed; the job ids done.

    A forge that cannot be reached now leaves the effect intended, to be tried on a later
    poll; it never stops the runner.
    """
    query = sa.select(effects.c.job_id).where(
        effects.c.kind == CLOSE, effects.c.status == EffectStatus.intended.value
    )
    with store.read() as conn:
        waiting = [int(row.job_id) for row in conn.execute(query)]
    closed = []
    for job_id in waiting:
        try:
            if _close(store, config, job_id):
                closed.append(job_id)
        except CairnError as exc:
            _log.warning("could not close the pull request of job %s yet: %s", job_id, exc)
    return closed


def _close(store: Store, config: Config, job_id: int) -> bool:
    from cairn.forges.credentials import forge_token

    secret_key = config.secret_key.get_secret_value() if config.secret_key else None
    installation_id = store.installation_id  # read before the job's lock is taken
    with store.begin() as conn:
        job = job_ledger.lock_job(conn, job_id)  # one runner at a time closes it
        effect = effect_ledger.find(conn, close_key(job_id))
        opened = effect_ledger.find(conn, pull_request_key_of(job_id))
        if effect is None or effect.status != EffectStatus.intended or opened is None:
            return False
        settings = ForgeSettings.from_scope(get_room(conn, job.room_id).scope)
        if settings is None:
            effect_ledger.mark(conn, close_key(job_id), EffectStatus.failed)
            return False
        token = forge_token(settings, environ=os.environ, conn=conn, secret_key=secret_key)
        forge = get_forge(settings, token, timeout=config.git_timeout)
        if opened.status == EffectStatus.done and opened.external_ref:
            numbers = [int(opened.external_ref)]
        else:
            numbers = _unrecorded(forge, job, installation_id)
        for number in numbers:
            if forge.get_pull_request(number).state == PullState.open:
                forge.update(number, PullAction.close, _comment(conn, job_id))
        done = ", ".join(f"#{n}" for n in numbers) or None
        effect_ledger.mark(conn, close_key(job_id), EffectStatus.done, done)
    return True


def _unrecorded(forge: Forge, job: Job, installation_id: str) -> list[int]:
    """The pull requests an unrecorded open left on the forge: from the job's branch, with
    the job's key line (as `deliver_forge._adopt` finds them)."""
    branch = job.branch_in(installation_id)
    marker = pull_request_marker_of(job.id, installation_id)
    return [
        p.number
        for p in forge.find_pull_requests(branch, marker)
        if p.head == branch and carries_line(p.body, marker)
    ]


def _comment(conn: sa.Connection, job_id: int) -> str:
    ended = [
        d
        for d in decisions.for_job(conn, job_id)
        if (d.gate is Gate.integration and d.verdict is Verdict.rejected)
        or d.verdict is Verdict.cancelled
    ]
    if ended and ended[-1].verdict is Verdict.cancelled:
        return f"Cancelled in cairn by {ended[-1].actor}"
    rejected = ended
    reason = rejected[-1].reason if rejected else None
    who = rejected[-1].actor if rejected else "a reviewer"
    return f"Rejected in cairn by {who}: {reason or 'no reason was given'}"
