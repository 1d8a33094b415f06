"""Rooms and groups: those the token's user belongs to, and a forge room's runner check."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from cairn.api import visibility
from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import (
    ROOM_NAME,
    GroupView,
    Health,
    RoomAgentBody,
    RoomAgentView,
    RoomCheckView,
    RoomCreateBody,
    RoomMadeView,
    RoomRebindBody,
    RoomView,
)

router = APIRouter(prefix="/api", tags=["rooms"])
RoomName = Annotated[str, Path(pattern=ROOM_NAME, description="The room's name.")]
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


@router.get(
    "/rooms/{room}/check",
    response_model=RoomCheckView,
    responses=responses(401, 403, 404, 422, 503),
)
def check_room(
    room: RoomName,
    served: ServedDep,
    user: UserDep,
) -> RoomCheckView:
    """Whether the room's forge credential reads the repository and pushes (an admin of it)."""
    from cairn.forges.rooms import check_room as check
    from cairn.jobs.policy import require_group_admin
    from cairn.store import identity
    from cairn.store.rooms import get_room

    with served.store.begin() as conn:
        found = get_room(conn, room)
        owner = identity.get_group(conn, found.group_id)
        require_group_admin(conn, owner, user.name, "check its rooms")
        return RoomCheckView.model_validate(
            check(conn, found.scope, found.base_branch, served.config)
        )


@router.put(
    "/rooms/{room}/agent",
    response_model=RoomAgentView,
    responses=responses(401, 403, 404, 422, 503),
)
def set_agent(
    room: RoomName, body: RoomAgentBody, served: ServedDep, user: UserDep
) -> RoomAgentView:
    """Name or clear the room's default agent (an admin of the room's group)."""
    from cairn.jobs.room_settings import set_room_agent

    with served.store.begin() as conn:
        default = set_room_agent(conn, room, body.agent, user.name)
    return RoomAgentView(room=room, agent=default)


@router.post(
    "/rooms",
    response_model=RoomMadeView,
    status_code=201,
    responses=responses(401, 403, 404, 422, 503),
)
def create_room(body: RoomCreateBody, served: ServedDep, user: UserDep) -> RoomMadeView:
    """Bind a new room to a forge repository or remote git URL (an admin of the group).

    A path on the server is refused: such a room is made on the cairn host itself.
    """
    from cairn.jobs.room_binding import ForgeOptions, create_room_as

    forge = ForgeOptions(
        body.forge,
        body.forge_repo,
        body.forge_url,
        body.forge_token_env,
        body.forge_credential,
        body.delivery,
    )
    with served.store.begin() as conn:
        made = create_room_as(
            conn,
            served.config,
            actor=user.name,
            name=body.name,
            group=body.group,
            repo=body.repo,
            base=body.base,
            verify=body.verify,
            agent=body.agent,
            forge=forge,
            remote=True,
        )
    return RoomMadeView(
        name=made.name, group=body.group, base=made.branch, forge=made.forge, agent=made.agent
    )


@router.post(
    "/rooms/{room}/rebind",
    response_model=RoomMadeView,
    responses=responses(401, 403, 404, 422, 503),
)
def rebind_room(
    room: RoomName, body: RoomRebindBody, served: ServedDep, user: UserDep
) -> RoomMadeView:
    """Bind the room to another remote repository or branch (an admin of the room's group)."""
    from cairn.forges import ForgeSettings
    from cairn.jobs.room_binding import rebind_room_as
    from cairn.store import identity
    from cairn.store.rooms import get_room

    with served.store.begin() as conn:
        branch = rebind_room_as(
            conn,
            served.config,
            actor=user.name,
            name=room,
            repo=body.repo,
            base=body.base,
            remote=True,
        )
        found = get_room(conn, room)
        group = identity.get_group(conn, found.group_id).name
        settings = ForgeSettings.from_scope(found.scope)
    forge = f"{settings.kind} {settings.repo}" if settings else None
    return RoomMadeView(name=room, group=group, base=branch, forge=forge, agent=found.default_agent)
