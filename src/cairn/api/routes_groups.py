"""A group's detail and its members: read by its members, changed by its admins."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import (
    NAME,
    GroupBody,
    GroupView,
    MemberBody,
    MembershipView,
    PolicyBody,
    PolicyView,
)
from cairn.errors import NotAllowed
from cairn.store import identity

router = APIRouter(prefix="/api/groups", tags=["groups"])
GroupName = Annotated[str, Path(pattern=NAME, description="The group's name.")]
UserName = Annotated[str, Path(pattern=NAME, description="The user's name.")]
CHANGE = responses(401, 403, 404, 422, 503)


@router.post(
    "", response_model=GroupView, status_code=201, responses=responses(401, 403, 409, 422, 503)
)
def add_group(body: GroupBody, served: ServedDep, user: UserDep) -> GroupView:
    """A new group with the caller as its first admin (an admin of some group creates one)."""
    from cairn.jobs.people import create_group, describe_group
    from cairn.jobs.policy import GroupPolicy

    settings = body.policy.model_dump(exclude_none=True) if body.policy else {}
    policy = GroupPolicy.parse(settings)
    with served.store.begin() as conn:
        made = create_group(conn, body.name, user.name, policy)
        return GroupView.model_validate(describe_group(conn, made))


@router.post("/{group}/policy", response_model=PolicyView, responses=CHANGE)
def change_policy(
    group: GroupName, body: PolicyBody, served: ServedDep, user: UserDep
) -> PolicyView:
    """Change some of the group's policy (an admin of it); every change is a recorded decision."""
    from cairn.jobs import policy

    settings = body.settings.model_dump(exclude_none=True)
    with served.store.begin() as conn:
        found = identity.get_group(conn, group)
        before = policy.GroupPolicy.of(found)
        if settings:
            found, decision = policy.change_policy(conn, group, user.name, settings, body.reason)
        else:
            policy.require_group_admin(conn, found, user.name, "change its policy")
            decision = None
    after = policy.GroupPolicy.of(found)
    return PolicyView(
        group=found.name,
        policy=after.to_dict(),
        policy_text=after.describe(),
        before=before.to_dict(),
        decision=decision.id if decision else None,
    )


@router.get("/{group}", response_model=GroupView, responses=CHANGE)
def show_group(group: GroupName, served: ServedDep, user: UserDep) -> GroupView:
    """A group you belong to: its policy, members with their roles, and rooms."""
    from cairn.jobs.people import describe_group

    with served.store.begin() as conn:
        found = identity.get_group(conn, group)
        if identity.membership(conn, found.id, user.id) is None:
            raise NotAllowed(f"{user.name} is not a member of group {found.name}")
        return GroupView.model_validate(describe_group(conn, found))


@router.post("/{group}/members", response_model=MembershipView, responses=CHANGE)
def add_member(
    group: GroupName, body: MemberBody, served: ServedDep, user: UserDep
) -> MembershipView:
    """Add an existing user to the group, or change their role (an admin of the group)."""
    from cairn.jobs import people

    with served.store.begin() as conn:
        made, before = people.add_member(conn, group, body.name, user.name, body.role)
        name = identity.get_user(conn, made.user_id).name
    return MembershipView(
        group=group, name=name, role=str(made.role), before=str(before) if before else None
    )


@router.delete("/{group}/members/{name}", response_model=MembershipView, responses=CHANGE)
def remove_member(
    group: GroupName, name: UserName, served: ServedDep, user: UserDep
) -> MembershipView:
    """Take a user out of the group (an admin of it); their jobs there block at their next gate."""
    from cairn.jobs import people
    from cairn.jobs.policy import require_group_admin

    with served.store.begin() as conn:
        found = identity.get_group(conn, group)
        # Before looking the user up: a non-admin learns nothing of who exists.
        require_group_admin(conn, found, user.name, "change who is in it")
        leaving = identity.get_user(conn, name)
        before = identity.membership(conn, found.id, leaving.id)
        people.remove_member(conn, group, name, user.name)
    return MembershipView(
        group=found.name,
        name=leaving.name,
        role=None,
        before=str(before.role) if before else None,
    )
