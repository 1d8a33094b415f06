"""Rooms: a group's work room bound to one repository and base branch."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import NotFound, UsageError
from cairn.next_action import Action, NextAction
from cairn.store.identity import _check_name
from cairn.store.records import Room
from cairn.store.schema import rooms, utcnow


def create_room(
    conn: sa.Connection,
    *,
    name: str,
    group_id: int,
    repo: str,
    base_branch: str,
    verify_command: str | None = None,
    scope: dict[str, Any] | None = None,
    default_agent: str | None = None,
) -> Room:
    """Bind a new room to a repository; room names are unique."""
    _check_name(name, "room")
    if conn.execute(sa.select(rooms.c.id).where(rooms.c.name == name)).first():
        raise UsageError(f"room {name!r} already exists; pick another name")
    room_id = conn.execute(
        sa.insert(rooms)
        .values(
            name=name,
            group_id=group_id,
            repo=repo,
            base_branch=base_branch,
            verify_command=verify_command,
            scope=dict(scope or {}),
            default_agent=default_agent,
            created_at=utcnow(),
        )
        .returning(rooms.c.id)
    ).scalar_one()
    return get_room(conn, room_id)


_BY_ID = sa.select(rooms).where(rooms.c.id == sa.bindparam("key"))
_BY_NAME = sa.select(rooms).where(rooms.c.name == sa.bindparam("key"))


def get_room(conn: sa.Connection, key: int | str) -> Room:
    row = conn.execute(_BY_ID if isinstance(key, int) else _BY_NAME, {"key": key}).first()
    if row is None:
        raise NotFound(f"no room {key!r}", next_actions=[NextAction(Action.create_room)])
    return Room.from_row(row)


def list_rooms(conn: sa.Connection) -> list[Room]:
    return [Room.from_row(r) for r in conn.execute(sa.select(rooms).order_by(rooms.c.id))]


def rebind_room(conn: sa.Connection, room_id: int, *, repo: str, base_branch: str) -> Room:
    """Bind the room to another repository or base branch (jobs requested before then block)."""
    updated = conn.execute(
        sa.update(rooms).where(rooms.c.id == room_id).values(repo=repo, base_branch=base_branch)
    )
    if updated.rowcount != 1:
        raise NotFound(f"no room {room_id!r}", next_actions=[NextAction(Action.create_room)])
    return get_room(conn, room_id)


def set_default_agent(conn: sa.Connection, room_id: int, agent: str | None) -> Room:
    """Make `agent` (a named agent, checked by the caller) the room's default, or clear it."""
    updated = conn.execute(
        sa.update(rooms).where(rooms.c.id == room_id).values(default_agent=agent)
    )
    if updated.rowcount != 1:
        raise NotFound(f"no room {room_id!r}", next_actions=[NextAction(Action.create_room)])
    return get_room(conn, room_id)
