"""Rooms and groups: those the token's user belongs to."""

from __future__ import annotations

from fastapi import APIRouter

from cairn.api import visibility
from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import GroupView, Health, RoomView

router = APIRouter(prefix="/api", tags=["rooms"])
health_router = APIRouter(prefix="/api", tags=["health"])


@health_router.get("/health", response_model=Health)
def health() -> Health:
    """Whether the server answers (the one route without a token)."""
    return Health(status="ok")


@router.get("/rooms", response_model=list[RoomView], responses=responses(401, 503))
def list_rooms(served: ServedDep, user: UserDep) -> list[RoomView]:
    """The rooms of your groups."""
    with served.store.begin() as conn:
        names = {group.id: group.name for group in visibility.groups_of(conn, user)}
        rooms = visibility.visible_rooms(conn, user)
    return [
        RoomView(
            id=r.id,
            name=r.name,
            group=names[r.group_id],
            base=r.base_branch,
            verify=r.verify_command,
            agent=r.default_agent,
        )
        for r in rooms
    ]


@router.get("/groups", response_model=list[GroupView], responses=responses(401, 503))
def list_groups(served: ServedDep, user: UserDep) -> list[GroupView]:
    """Your groups, with their policy, members and rooms (as `cairn group show --json`)."""
    from cairn.jobs.people import describe_group

    with served.store.begin() as conn:
        return [
            GroupView.model_validate(describe_group(conn, group))
            for group in visibility.groups_of(conn, user)
        ]
