"""Stored forge credentials: stored and removed by a group's admin, listed by name only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import NAME, CredentialBody, CredentialView

router = APIRouter(prefix="/api/credentials", tags=["credentials"])
CredentialName = Annotated[str, Path(pattern=NAME, description="The credential's name.")]
GroupName = Annotated[str, Query(pattern=NAME, description="The group whose admin you are.")]


@router.get("", response_model=list[str], responses=responses(401, 403, 503))
def list_credentials(served: ServedDep, user: UserDep) -> list[str]:
    """The stored credentials' names, never their values (an admin of some group)."""
    from cairn.jobs.policy import require_an_admin
    from cairn.store.credentials import credential_names

    with served.store.begin() as conn:
        require_an_admin(conn, user.name, "list forge credentials")
        return credential_names(conn)


@router.post(
    "",
    response_model=CredentialView,
    status_code=201,
    responses=responses(401, 403, 404, 422, 503),
)
def store_credential(body: CredentialBody, served: ServedDep, user: UserDep) -> CredentialView:
    """Store a forge token encrypted (an admin of the group); the answer holds only its name."""
    from cairn.jobs.forge_credentials import store_credential as store

    with served.store.begin() as conn:
        store(conn, body.name, body.secret, group=body.group, actor=user.name, config=served.config)
    return CredentialView(name=body.name)


@router.delete("/{name}", status_code=204, responses=responses(401, 403, 404, 409, 422, 503))
def remove_credential(
    name: CredentialName, served: ServedDep, user: UserDep, group: GroupName = "default"
) -> None:
    """Remove a stored credential (an admin of the group); refused while a room names it."""
    from cairn.jobs.forge_credentials import drop_credential

    with served.store.begin() as conn:
        drop_credential(conn, name, group=group, actor=user.name)
