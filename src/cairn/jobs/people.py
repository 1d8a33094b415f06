"""People and groups, administered by group admins: users, tokens, groups and memberships."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import NotAllowed, UsageError
from cairn.jobs.policy import GroupPolicy, require_group_admin
from cairn.next_action import Action, NextAction
from cairn.store import identity as ledger
from cairn.store.records import Group, Membership, Role, User
from cairn.store.rooms import list_rooms


def create_user(
    conn: sa.Connection, name: str, actor: str, *, group: str, role: str
) -> tuple[User, str]:
    """Add a user to `group` (an admin of it decides) and issue their first API token."""
    found = ledger.get_group(conn, group)
    require_group_admin(conn, found, actor, "add people to it")
    user = ledger.add_user(conn, name)
    ledger.set_membership(conn, found.id, user.id, role)
    return user, ledger.issue_token(conn, user.id)


def user_rows(conn: sa.Connection) -> list[dict[str, Any]]:
    """Every user with their groups and roles, and whether they hold a token (never the token)."""
    return [
        {
            "name": user.name,
            "groups": {g.name: str(role) for g, role in ledger.memberships_of(conn, user.id)},
            "has_token": ledger.has_token(conn, user.id),
        }
        for user in ledger.list_users(conn)
    ]


def rotate_token(conn: sa.Connection, name: str, actor: str) -> str:
    """Replace the user's API token: the user themself, or an admin of one of their groups."""
    user = ledger.get_user(conn, name)
    acting = ledger.get_user(conn, actor)
    if acting.id != user.id:
        theirs = {g.id for g, _ in ledger.memberships_of(conn, user.id)}
        mine = {g.id for g, role in ledger.memberships_of(conn, acting.id) if role == Role.admin}
        if not theirs & mine:
            raise NotAllowed(
                f"only {name} or an admin of one of {name}'s groups can replace {name}'s token"
            )
    return ledger.issue_token(conn, user.id)


def create_group(conn: sa.Connection, name: str, actor: str, policy: GroupPolicy) -> Group:
    """A new group with `actor` as its first admin; only an admin of some group may create one."""
    user = ledger.get_user(conn, actor)
    if not any(role == Role.admin for _, role in ledger.memberships_of(conn, user.id)):
        raise NotAllowed(f"only an admin of a group can create a group; {actor} is not one")
    group = ledger.add_group(conn, name, policy.to_dict())
    ledger.set_membership(conn, group.id, user.id, Role.admin)
    return group


def add_member(
    conn: sa.Connection, group: str, name: str, actor: str, role: str
) -> tuple[Membership, Role | None]:
    """Add `name` to the group, or change their role; returns the role they had before."""
    found = ledger.get_group(conn, group)
    require_group_admin(conn, found, actor, "change who is in it")
    user = ledger.get_user(conn, name)
    before = ledger.membership(conn, found.id, user.id)
    if before and before.role is Role.admin and role != Role.admin:
        _keep_an_admin(conn, found, user)
    return ledger.set_membership(conn, found.id, user.id, role), before.role if before else None


def remove_member(conn: sa.Connection, group: str, name: str, actor: str) -> None:
    """Take `name` out of the group; their jobs there block at their next resume or gate."""
    found = ledger.get_group(conn, group)
    require_group_admin(conn, found, actor, "change who is in it")
    user = ledger.get_user(conn, name)
    before = ledger.membership(conn, found.id, user.id)
    if before is None:
        raise UsageError(f"{name} is not a member of group {group}; nothing changed")
    if before.role is Role.admin:
        _keep_an_admin(conn, found, user)
    ledger.remove_membership(conn, found.id, user.id)


def describe_group(conn: sa.Connection, group: Group) -> dict[str, Any]:
    """A group as `cairn group show --json` and `GET /api/groups` show it."""
    policy = GroupPolicy.of(group)
    return {
        "name": group.name,
        "policy": policy.to_dict(),
        "policy_text": policy.describe(),
        "members": [{"name": u.name, "role": r} for u, r in ledger.members(conn, group.id)],
        "rooms": [r.name for r in list_rooms(conn) if r.group_id == group.id],
    }


def _keep_an_admin(conn: sa.Connection, group: Group, leaving: User) -> None:
    admins = [u for u, role in ledger.members(conn, group.id) if role == Role.admin]
    if [u.id for u in admins] == [leaving.id]:
        raise UsageError(
            f"{leaving.name} is the last admin of group {group.name}",
            next_actions=[NextAction(Action.add_group_admin, group=group.name)],
        )
