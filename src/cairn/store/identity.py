"""Users, groups and memberships."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import NotFound, UsageError
from cairn.store.records import Group, Membership, User
from cairn.store.schema import groups, memberships, users, utcnow

ROLES = ("member", "admin")
DEFAULT_POLICY: dict[str, Any] = {"run_approval": "auto"}


def add_user(conn: sa.Connection, name: str) -> User:
    """Create a user; names are unique."""
    _check_name(name, "user")
    if find_user(conn, name) is not None:
        raise UsageError(f"user {name!r} already exists; pick another name")
    result = conn.execute(sa.insert(users).values(name=name, created_at=utcnow()))
    return get_user(conn, result.inserted_primary_key[0])


def find_user(conn: sa.Connection, name: str) -> User | None:
    row = conn.execute(sa.select(users).where(users.c.name == name)).first()
    return User.from_row(row) if row else None


def get_user(conn: sa.Connection, key: int | str) -> User:
    column = users.c.id if isinstance(key, int) else users.c.name
    row = conn.execute(sa.select(users).where(column == key)).first()
    if row is None:
        raise NotFound(f"no user {key!r}; `cairn user add NAME` creates one")
    return User.from_row(row)


def add_group(conn: sa.Connection, name: str, policy: dict[str, Any] | None = None) -> Group:
    _check_name(name, "group")
    if conn.execute(sa.select(groups.c.id).where(groups.c.name == name)).first():
        raise UsageError(f"group {name!r} already exists; pick another name")
    values = {
        "name": name,
        "policy": dict(DEFAULT_POLICY if policy is None else policy),
        "created_at": utcnow(),
    }
    result = conn.execute(sa.insert(groups).values(**values))
    return get_group(conn, result.inserted_primary_key[0])


def get_group(conn: sa.Connection, key: int | str) -> Group:
    column = groups.c.id if isinstance(key, int) else groups.c.name
    row = conn.execute(sa.select(groups).where(column == key)).first()
    if row is None:
        raise NotFound(f"no group {key!r}; `cairn group add NAME` creates one")
    return Group.from_row(row)


def set_membership(conn: sa.Connection, group_id: int, user_id: int, role: str) -> Membership:
    """Add the user to the group with `role`, or change the role they have."""
    if role not in ROLES:
        raise UsageError(f"role must be one of {', '.join(ROLES)}")
    where = (memberships.c.group_id == group_id) & (memberships.c.user_id == user_id)
    updated = conn.execute(sa.update(memberships).where(where).values(role=role))
    if updated.rowcount == 0:
        conn.execute(
            sa.insert(memberships).values(
                group_id=group_id, user_id=user_id, role=role, created_at=utcnow()
            )
        )
    return Membership(group_id=group_id, user_id=user_id, role=role)


def membership(conn: sa.Connection, group_id: int, user_id: int) -> Membership | None:
    row = conn.execute(
        sa.select(memberships).where(
            (memberships.c.group_id == group_id) & (memberships.c.user_id == user_id)
        )
    ).first()
    return Membership.from_row(row) if row else None


def _check_name(name: str, what: str) -> None:
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-_." for c in name):
        raise UsageError(
            f"a {what} name uses letters, digits, '-', '_' or '.', at most 64 characters"
        )
