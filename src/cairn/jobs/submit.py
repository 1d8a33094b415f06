"""Turning a person's request into a job: validated once, stored once, never changed."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import NotAllowed, UsageError
from cairn.sanitize import Sanitizer
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Job
from cairn.store.rooms import get_room

REQUEST_LIMIT = 20_000


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
    """Record the request (its text sanitized once) and queue its job."""
    if not text.strip():
        raise UsageError("the request is empty; say what the agent should do")
    if len(text) > REQUEST_LIMIT:
        raise UsageError(f"the request is longer than {REQUEST_LIMIT} characters; shorten it")
    found = get_room(conn, room)
    user = get_user(conn, actor)
    group = get_group(conn, found.group_id)
    if membership(conn, group.id, user.id) is None:
        raise NotAllowed(f"{actor} is not a member of group {group.name}, which owns room {room}")
    scope = {
        "dependencies": "ask",
        "commands": True,
        "network": False,
        "delivery": "push_and_merge",
    }
    return job_ledger.submit(
        conn,
        room_id=found.id,
        requester_id=user.id,
        text=sanitizer.clean(text, REQUEST_LIMIT),
        agent=agent,
        scope=scope,
        kind=kind,
        retry_of=retry_of,
    )
