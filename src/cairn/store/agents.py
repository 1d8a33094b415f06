"""Named agents: installation-wide agent configurations that jobs and rooms refer to by name.

A named agent's spec is what a job stores when it is submitted with `--agent NAME` (copied,
so changing or removing the named agent later never changes a job). The spec never holds an
API key: the adapter's validation (for `openai`, `cairn.agents.openai_spec`) refuses one before
it reaches `add_agent`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from cairn.errors import InvalidState, NotFound, UsageError
from cairn.store.records import NamedAgent
from cairn.store.schema import agents, rooms, utcnow

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
"""What an agent's name looks like: lower-case, digits, `-` and `_`, at most 40 characters."""
RESERVED_NAMES = frozenset({"script", "openai", "claude", "codex", "aider"})
"""Adapter names: `--agent openai` must never mean a named agent called openai."""

Lookup = Callable[[str], dict[str, Any] | None]
"""A named agent's spec by name, or None: what `load_agent_spec(text, named=...)` takes."""


def check_name(name: str) -> str:
    """`name` if it may name an agent; a UsageError saying what a name looks like otherwise."""
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise UsageError(
            "an agent's name starts with a lower-case letter or digit and uses only lower-case "
            "letters, digits, '-' and '_', at most 40 characters (for example local-qwen)"
        )
    if name in RESERVED_NAMES:
        raise UsageError(
            f"{name!r} is the name of an agent adapter, so `--agent {name}` would be ambiguous; "
            "pick another name"
        )
    return name


def add_agent(conn: sa.Connection, name: str, spec: Mapping[str, Any]) -> NamedAgent:
    """Store a new named agent; names are unique."""
    check_name(name)
    if find_agent(conn, name) is not None:
        raise UsageError(
            f"an agent named {name!r} already exists; remove it first "
            f"(`cairn agent remove {name}`) or pick another name"
        )
    agent_id = conn.execute(
        sa.insert(agents)
        .values(name=name, spec=dict(spec), created_at=utcnow())
        .returning(agents.c.id)
    ).scalar_one()
    return _get(conn, agents.c.id == agent_id)


def find_agent(conn: sa.Connection, name: str) -> NamedAgent | None:
    """The named agent, or None when there is none by that name."""
    row = conn.execute(sa.select(agents).where(agents.c.name == name)).first()
    return NamedAgent.from_row(row) if row else None


def get_agent(conn: sa.Connection, name: str) -> NamedAgent:
    """The named agent; NotFound (saying how to list them) when there is none."""
    found = find_agent(conn, name)
    if found is None:
        raise NotFound(f"there is no agent named {_shown(name)}; `cairn agent list` shows them")
    return found


def list_agents(conn: sa.Connection) -> list[NamedAgent]:
    """Every named agent, in the order they were added."""
    query = sa.select(agents).order_by(agents.c.id)
    return [NamedAgent.from_row(row) for row in conn.execute(query)]


def remove_agent(conn: sa.Connection, name: str) -> None:
    """Remove a named agent; refused while a room uses it as its default."""
    found = get_agent(conn, name)
    users = conn.execute(
        sa.select(rooms.c.name).where(rooms.c.default_agent == found.name).order_by(rooms.c.id)
    ).scalars()
    named = list(users)
    if named:
        raise InvalidState(
            f"agent {name} is the default agent of room {', '.join(named)}; give the room "
            "another default first (`cairn room set-agent ROOM NAME` or `--clear`)"
        )
    conn.execute(sa.delete(agents).where(agents.c.id == found.id))


def lookup(conn: sa.Connection) -> Lookup:
    """A name-to-spec lookup over this connection, for `load_agent_spec(text, named=...)`."""

    def spec_of(name: str) -> dict[str, Any] | None:
        found = find_agent(conn, name)
        return dict(found.spec) if found else None

    return spec_of


def _get(conn: sa.Connection, where: Any) -> NamedAgent:
    return NamedAgent.from_row(conn.execute(sa.select(agents).where(where)).one())


def _shown(name: str) -> str:
    # Echo only what looks like a name: a mistyped value may be a path or a pasted key.
    return repr(name) if NAME_PATTERN.fullmatch(name) else "by that name"
