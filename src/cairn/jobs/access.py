"""Re-verification of the requester's access, on every resume and before delivery."""

from __future__ import annotations

import sqlalchemy as sa

from cairn.errors import NotFound
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Job, Request
from cairn.store.rooms import get_room


def missing_access(conn: sa.Connection, job: Job, request: Request) -> str | None:
    """Why the requester may no longer have this job worked on, or None when access holds."""
    try:
        room = get_room(conn, job.room_id)
        group = get_group(conn, room.group_id)
        requester = get_user(conn, request.requester_id)
    except NotFound:
        return "the job's room, group or requester no longer exists; an admin can cancel the job"
    if room.id != request.room_id:
        return "the job's room changed since the request; an admin can cancel the job"
    if membership(conn, group.id, requester.id) is None:
        return (
            f"the requester {requester.name} is no longer a member of group {group.name}; "
            "add them back and run `cairn resume`, or cancel the job"
        )
    return None
