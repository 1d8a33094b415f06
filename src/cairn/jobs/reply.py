"""Asking for changes at the integration gate (`cairn reply`): the same job runs its agent again.

The reviewer's message is a decision (gate `integration`, verdict `changes_requested`, the
message its reason), audit-chained like every other. The job goes back to `running_agent` in
its own workspace, on its own branch and baseline; the message waits in the job's own context
for its next turn (see `follow_ups`). The agent stage's recipe names the decision, so the
engine runs the agent again, and everything after it; an approval given before the reply was
made before the new result was summarized, so it no longer counts.
"""

from __future__ import annotations

import sqlalchemy as sa

from cairn.errors import InvalidState, NotAllowed, UsageError
from cairn.jobs import context
from cairn.jobs.access import missing_access
from cairn.jobs.gates import authorize
from cairn.jobs.policy import REASON_LIMIT, GroupPolicy, policy_label
from cairn.next_action import Action, NextAction
from cairn.sanitize import Sanitizer, strip_control
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group
from cairn.store.records import Job
from cairn.store.rooms import get_room


def reply(
    conn: sa.Connection,
    job_id: int,
    actor: str,
    message: str,
    *,
    fresh: bool = False,
    sanitizer: Sanitizer | None = None,
) -> Job:
    """Ask for changes to the result a job waits with at review; the job runs its agent again.

    Whoever may approve or reject at the integration gate may reply. A job approved but not yet
    taken by a runner may still be replied to: the approval then no longer counts.
    """
    if not strip_control(message or "").strip():
        raise UsageError("a reply needs a message saying what to change; pass it as MESSAGE")
    job = job_ledger.lock_job(conn, job_id)
    _check_at_review(job)
    request = job_ledger.get_request(conn, job.request_id)
    group = get_group(conn, get_room(conn, job.room_id).group_id)
    policy = GroupPolicy.of(group)
    verdict = Verdict.changes_requested
    authorize(conn, Gate.integration, verdict, actor, request=request, group=group, policy=policy)
    lost = missing_access(conn, job, request)
    if lost:
        # Nothing is blocked by a refused reply, so there is nothing to resume afterwards.
        steps = [step for step in lost.next_actions if step.action is not Action.resume]
        raise NotAllowed(f"job {job_id} cannot run again: {lost.diagnosis}", next_actions=steps)
    said = (sanitizer or Sanitizer()).clean(message, REASON_LIMIT)
    decisions.append(
        conn,
        job_id=job.id,
        gate=Gate.integration,
        verdict=verdict,
        actor=actor,
        reason=said,
        policy=policy_label(group, policy),
    )
    agent = str(request.agent.get("adapter", "agent"))
    context.post_follow_up(conn, job.id, agent, said, fresh=fresh)
    return job_ledger.transition(conn, job, Stage.running_agent, Status.queued)


def requested_changes(conn: sa.Connection, job_id: int) -> list[int]:
    """The ids of the job's changes-requested decisions, oldest first."""
    return [
        d.id
        for d in decisions.for_job(conn, job_id)
        if d.gate is Gate.integration and d.verdict is Verdict.changes_requested
    ]


def _check_at_review(job: Job) -> None:
    """Refuse, saying where the job is and what can be done, unless it is at review."""
    where = f"job {job.id} is {job.status} at {job.stage}"
    show = NextAction(Action.show, job=job.id)
    if job.status.is_terminal:
        raise InvalidState(
            f"job {job.id} has ended ({job.status}); a reply asks for changes only while a job "
            "waits for review. New work on it is a new job",
            next_actions=[NextAction(Action.retry, job=job.id)],
        )
    if job.stage is not Stage.awaiting_review:
        raise InvalidState(
            f"{where}; a reply asks for changes only once it waits for review", next_actions=[show]
        )
    if job.status is Status.blocked:
        raise InvalidState(
            f"{where}: {job.diagnosis or 'it is blocked'}", next_actions=[*job.next_actions, show]
        )
    if job.status is Status.running:
        raise InvalidState(
            f"{where}: a runner is delivering its approved result; it can no longer be replied to",
            next_actions=[show],
        )
