"""Users (with hashed API tokens), groups with their policy, and memberships."""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any

import sqlalchemy as sa

from cairn.errors import NotFound, UsageError
from cairn.next_action import Action, NextAction
from cairn.store.records import Group, Membership, Role, User
from cairn.store.schema import groups, memberships, users, utcnow

ROLES = ("member", "admin")
# Strict unless a group says otherwise: every run and every dependency waits for an admin.
DEFAULT_POLICY: dict[str, Any] = {
    "run_approval": "admin",
    "auto_approve_kinds": [],
    "dependency_approval": "admin",
    "integration": "admin",
}
TOKEN_PREFIX = "cairn_"
# Actors that decisions name which are not people; no user may take these names.
RESERVED_USER_NAMES = frozenset({"policy", "cairn", "system"})
# People and groups are told apart by name in every decision: ASCII only, so a Cyrillic letter
# cannot make a second "admin", and case-folded, so "Alice" is "alice".
NAME_RULE = (
    "ASCII letters (read as lowercase), digits, '.', '_' or '-', starting with a letter or digit"
)
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def person_name(name: str, what: str = "user") -> str:
    """The canonical (case-folded) form of a user or group name; UsageError when it is not one."""
    folded = name.lower() if name.isascii() else name
    if not _NAME.fullmatch(folded):
        raise UsageError(f"a {what} name uses {NAME_RULE}, at most 64 characters")
    return folded


def add_user(conn: sa.Connection, name: str) -> User:
    """Create a user; names are unique (case-folded ASCII, see `person_name`)."""
    name = person_name(name)
    if name in RESERVED_USER_NAMES:
        raise UsageError(f"{name!r} is reserved for cairn's own decisions; pick another name")
    if find_user(conn, name) is not None:
        raise UsageError(f"user {name!r} already exists; pick another name")
    user_id = conn.execute(
        sa.insert(users).values(name=name, created_at=utcnow()).returning(users.c.id)
    ).scalar_one()
    return get_user(conn, user_id)


def find_user(conn: sa.Connection, name: str) -> User | None:
    row = conn.execute(sa.select(users).where(_named(users.c.name, name))).first()
    return User.from_row(row) if row else None


_USER_BY_ID = sa.select(users).where(users.c.id == sa.bindparam("id"))
_GROUP_BY_ID = sa.select(groups).where(groups.c.id == sa.bindparam("id"))
_MEMBERSHIP = sa.select(memberships).where(
    memberships.c.group_id == sa.bindparam("group"), memberships.c.user_id == sa.bindparam("user")
)


def get_user(conn: sa.Connection, key: int | str) -> User:
    if isinstance(key, int):
        row = conn.execute(_USER_BY_ID, {"id": key}).first()
    else:
        row = conn.execute(sa.select(users).where(_named(users.c.name, key))).first()
    if row is None:
        raise NotFound(f"no user {key!r}", next_actions=[NextAction(Action.add_user)])
    return User.from_row(row)


def list_users(conn: sa.Connection) -> list[User]:
    return [User.from_row(r) for r in conn.execute(sa.select(users).order_by(users.c.id))]


def hash_token(token: str) -> str:
    """The only form of an API token the store ever holds."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(conn: sa.Connection, user_id: int) -> str:
    """Give the user a new API token, replacing any old one; the caller shows it once."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    updated = conn.execute(
        sa.update(users).where(users.c.id == user_id).values(token_hash=hash_token(token))
    )
    if updated.rowcount != 1:
        raise NotFound(f"no user {user_id!r}", next_actions=[NextAction(Action.add_user)])
    return token


def user_for_token(conn: sa.Connection, token: str) -> User | None:
    """The user an API token belongs to, or None for an unknown or replaced token."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    row = conn.execute(sa.select(users).where(users.c.token_hash == hash_token(token))).first()
    return User.from_row(row) if row else None


def has_token(conn: sa.Connection, user_id: int) -> bool:
    query = sa.select(users.c.token_hash).where(users.c.id == user_id)
    return conn.execute(query).scalar() is not None


def add_group(conn: sa.Connection, name: str, policy: dict[str, Any] | None = None) -> Group:
    name = person_name(name, "group")
    if conn.execute(sa.select(groups.c.id).where(_named(groups.c.name, name))).first():
        raise UsageError(f"group {name!r} already exists; pick another name")
    values = {
        "name": name,
        "policy": dict(DEFAULT_POLICY if policy is None else policy),
        "created_at": utcnow(),
    }
    group_id = conn.execute(sa.insert(groups).values(**values).returning(groups.c.id)).scalar_one()
    return get_group(conn, group_id)


def get_group(conn: sa.Connection, key: int | str) -> Group:
    if isinstance(key, int):
        row = conn.execute(_GROUP_BY_ID, {"id": key}).first()
    else:
        row = conn.execute(sa.select(groups).where(_named(groups.c.name, key))).first()
    if row is None:
        raise NotFound(f"no group {key!r}", next_actions=[NextAction(Action.add_group)])
    return Group.from_row(row)


def list_groups(conn: sa.Connection) -> list[Group]:
    return [Group.from_row(r) for r in conn.execute(sa.select(groups).order_by(groups.c.id))]


def set_policy(conn: sa.Connection, group_id: int, policy: dict[str, Any]) -> Group:
    """Replace the group's policy (callers record the change as a decision)."""
    updated = conn.execute(sa.update(groups).where(groups.c.id == group_id).values(policy=policy))
    if updated.rowcount != 1:
        raise NotFound(f"no group {group_id!r}", next_actions=[NextAction(Action.add_group)])
    return get_group(conn, group_id)


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
    return Membership(group_id=group_id, user_id=user_id, role=Role(role))


def remove_membership(conn: sa.Connection, group_id: int, user_id: int) -> bool:
    """Take the user out of the group; False when they were not in it."""
    where = (memberships.c.group_id == group_id) & (memberships.c.user_id == user_id)
    return conn.execute(sa.delete(memberships).where(where)).rowcount == 1


def membership(conn: sa.Connection, group_id: int, user_id: int) -> Membership | None:
    row = conn.execute(_MEMBERSHIP, {"group": group_id, "user": user_id}).first()
    return Membership.from_row(row) if row else None


def members(conn: sa.Connection, group_id: int) -> list[tuple[User, str]]:
    """The group's members with their roles, in the order they were added."""
    query = (
        sa.select(users, memberships.c.role)
        .join(memberships, memberships.c.user_id == users.c.id)
        .where(memberships.c.group_id == group_id)
        .order_by(memberships.c.created_at, users.c.id)
    )
    return [(User.from_row(row), row.role) for row in conn.execute(query)]


def memberships_of(conn: sa.Connection, user_id: int) -> list[tuple[Group, str]]:
    """The groups the user belongs to, with their role in each."""
    query = (
        sa.select(groups, memberships.c.role)
        .join(memberships, memberships.c.group_id == groups.c.id)
        .where(memberships.c.user_id == user_id)
        .order_by(groups.c.id)
    )
    return [(Group.from_row(row), row.role) for row in conn.execute(query)]


def _named(column: sa.ColumnElement[str], name: str) -> sa.ColumnElement[bool]:
    # Case-insensitive, so "Alice" finds alice, and a row stored before names were folded too.
    return sa.func.lower(column) == name.lower()


def _check_name(name: str, what: str) -> None:
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-_." for c in name):
        raise UsageError(
            f"a {what} name uses letters, digits, '-', '_' or '.', at most 64 characters"
        )
