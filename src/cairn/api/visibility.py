"""What a user may see: the jobs, rooms and groups of the groups they belong to.

Locally the CLI is the store owner's tool and shows everything; over the API a person sees
only their own groups' work, so reading needs membership just as deciding does.
"""

from __future__ import annotations

import sqlalchemy as sa

from cairn.errors import NotAllowed
from cairn.store import identity
from cairn.store import jobs as job_ledger
from cairn.store.records import Group, Room, User
from cairn.store.rooms import get_room, list_rooms


def groups_of(conn: sa.Connection, user: User) -> list[Group]:
    """The groups the user is a member of."""
    return [group for group, _ in identity.memberships_of(conn, user.id)]


def visible_rooms(conn: sa.Connection, user: User) -> list[Room]:
    """The rooms of the user's groups."""
    mine = {group.id for group in groups_of(conn, user)}
    return [room for room in list_rooms(conn) if room.group_id in mine]


def require_room(conn: sa.Connection, user: User, key: int | str) -> Room:
    """The room, when the user belongs to its group; NotFound or NotAllowed otherwise."""
    room = get_room(conn, key)
    if identity.membership(conn, room.group_id, user.id) is None:
        group = identity.get_group(conn, room.group_id)
        raise NotAllowed(
            f"{user.name} is not a member of group {group.name}, which owns room {room.name}; "
            "an admin of that group can add them"
        )
    return room


def require_job(conn: sa.Connection, user: User, job_id: int) -> None:
    """Refuse unless the user belongs to the group of the job's room (NotFound for no job)."""
    job = job_ledger.get_job(conn, job_id)
    room = get_room(conn, job.room_id)
    if identity.membership(conn, room.group_id, user.id) is None:
        group = identity.get_group(conn, room.group_id)
        raise NotAllowed(
            f"{user.name} is not a member of group {group.name}, which owns job {job_id}'s room"
        )
