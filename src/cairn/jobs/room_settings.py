"""A room's settings its group's admin changes after creating it, for the CLI and the API."""

from __future__ import annotations

import sqlalchemy as sa

from cairn.jobs.policy import require_group_admin
from cairn.store import agents, identity
from cairn.store.rooms import get_room, set_default_agent


def set_room_agent(conn: sa.Connection, room: str, agent: str | None, actor: str) -> str | None:
    """Name (or with None clear) the agent a room's jobs use when they name none; its admin."""
    found = get_room(conn, room)
    owner = identity.get_group(conn, found.group_id)
    require_group_admin(conn, owner, actor, "change its rooms' default agent")
    default = agents.get_agent(conn, agents.check_name(agent)).name if agent else None
    set_default_agent(conn, found.id, default)
    return default
