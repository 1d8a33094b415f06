"""Users and their API tokens: listed and added by a group's admins, tokens replaced once shown."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import NAME, TokenView, UserBody, UserMade, UserRow

router = APIRouter(prefix="/api/users", tags=["users"])
UserName = Annotated[str, Path(pattern=NAME, description="The user's name.")]


@router.get("", response_model=list[UserRow], responses=responses(401, 403, 503))
def list_users(served: ServedDep, user: UserDep) -> list[UserRow]:
    """Everyone, their groups and roles (an admin of some group: it names people of every group)."""
    from cairn.jobs import people
    from cairn.jobs.policy import require_an_admin

    with served.store.begin() as conn:
        require_an_admin(conn, user.name, "list the users")
        return [UserRow.model_validate(row) for row in people.user_rows(conn)]


@router.post(
    "", response_model=UserMade, status_code=201, responses=responses(401, 403, 404, 409, 422, 503)
)
def add_user(body: UserBody, served: ServedDep, user: UserDep) -> UserMade:
    """Add a user to a group (an admin of it) and answer their token, this once only."""
    from cairn.jobs import people

    with served.store.begin() as conn:
        made, token = people.create_user(
            conn, body.name, user.name, group=body.group, role=body.role
        )
    return UserMade(name=made.name, group=body.group, role=body.role, token=token)


@router.post(
    "/{name}/token", response_model=TokenView, responses=responses(401, 403, 404, 422, 503)
)
def replace_token(name: UserName, served: ServedDep, user: UserDep) -> TokenView:
    """A new token for the user (themself, or an admin of one of their groups); the old one ends."""
    from cairn.jobs import people

    with served.store.begin() as conn:
        token = people.rotate_token(conn, name, user.name)
    return TokenView(name=name, token=token)
