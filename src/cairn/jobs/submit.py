"""Turning a person's request into a job: validated once, stored once, never changed."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.engine import EffectStatus
from cairn.errors import InvalidState, NotAllowed, UsageError
from cairn.jobs import run_gate
from cairn.jobs.access import BINDING_KEY, room_binding
from cairn.jobs.policy import JOB_KINDS
from cairn.next_action import Action, NextAction
from cairn.sanitize import Sanitizer, strip_control
from cairn.store import agents as named_agents
from cairn.store import effects
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Job, Room, User
from cairn.store.rooms import get_room
from cairn.store.store import installation_of

REQUEST_LIMIT = 20_000
DEFAULT_SCOPE: dict[str, Any] = {
    "dependencies": "ask",
    "commands": True,
    "network": False,
    "delivery": "push_and_merge",
}


def submit_job(
    conn: sa.Connection,
    *,
    room: str,
    text: str,
    agent: dict[str, Any],
    actor: str,
    sanitizer: Sanitizer,
    kind: str = "interactive",
    retry_of: int | None = None,
) -> Job:
    """Record the request (its text sanitized once) and its job, already at the run gate."""
    if not strip_control(text).strip():  # only control characters is empty too
        raise UsageError("the request is empty; say what the agent should do")
    if len(text) > REQUEST_LIMIT:
        raise UsageError(f"the request is longer than {REQUEST_LIMIT} characters; shorten it")
    if kind not in JOB_KINDS:
        # Not echoed: a mistyped value may be anything pasted, a credential included.
        raise UsageError(f"a job's kind is one of {', '.join(JOB_KINDS)}")
    found = get_room(conn, room)
    user = _member(conn, found, actor)
    job = job_ledger.submit(
        conn,
        room_id=found.id,
        requester_id=user.id,
        text=sanitizer.clean(text, REQUEST_LIMIT),
        agent=agent,
        scope=DEFAULT_SCOPE | {BINDING_KEY: room_binding(found)},
        kind=kind,
        retry_of=retry_of,
    )
    # Decided in this transaction: `cairn approve` works at once, and admins see what waits.
    return run_gate.decide(conn, job, kind)


def resolve_agent(conn: sa.Connection, room: str, agent: str | None) -> dict[str, Any]:
    """The spec a job submitted to `room` with `--agent agent` stores.

    `agent` is `ADAPTER:ARGUMENT` or a named agent's name; None means the room's default
    agent, and a UsageError saying how to name one when the room has none.
    """
    from cairn.agents.registry import load_agent_spec

    if agent is not None:
        return load_agent_spec(agent, named=named_agents.lookup(conn))
    found = get_room(conn, room)
    if found.default_agent is None:
        raise UsageError(
            f"room {found.name} has no default agent, so the job must name one: pass --agent "
            "(a named agent from `cairn agent list`, openai:MODEL or script:PATH), or give the "
            f"room a default with `cairn room set-agent {found.name} NAME`"
        )
    return dict(named_agents.get_agent(conn, found.default_agent).spec)


def retry_job(conn: sa.Connection, job_id: int, actor: str) -> Job:
    """A new job for an ended one: same request, its own baseline and workspace, linked back.

    The old job's records stay exactly as they are; its branch, if it was pushed, is named in
    the new request's scope so the new work can refer to it.
    """
    old = job_ledger.get_job(conn, job_id)
    if not old.status.is_terminal:
        raise InvalidState(
            f"job {job_id} has not ended ({old.status} at {old.stage}); only an ended job can "
            "be retried",
            next_actions=[NextAction(Action.cancel, job=job_id)],
        )
    request = job_ledger.get_request(conn, old.request_id)
    room = get_room(conn, old.room_id)
    user = _member(conn, room, actor)
    scope = request.scope | {BINDING_KEY: room_binding(room), "retry_of": old.id}
    if any(
        e.kind == "push" and e.status == EffectStatus.done for e in effects.for_job(conn, old.id)
    ):
        scope["reference_branch"] = old.branch_in(installation_of(conn))
    job = job_ledger.submit(
        conn,
        room_id=room.id,
        requester_id=user.id,
        # Already sanitized when it was first submitted: copied as it is, never cleaned twice.
        text=request.text,
        agent=request.agent,
        scope=scope,
        kind=request.kind,
        retry_of=old.id,
    )
    return run_gate.decide(conn, job, request.kind)


def _member(conn: sa.Connection, room: Room, actor: str) -> User:
    user = get_user(conn, actor)
    group = get_group(conn, room.group_id)
    if membership(conn, group.id, user.id) is None:
        raise NotAllowed(
            f"{actor} is not a member of group {group.name}, which owns room {room.name}",
            next_actions=[NextAction(Action.add_group_member, group=group.name)],
        )
    return user
