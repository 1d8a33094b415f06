"""Connecting a room to a forge repository, in stages that survive leaving the page.

Choose a group; authorize at the forge in a window of its own (OAuth: the callback stores the
access token encrypted, as `cairn credential set` does); choose the repository and base branch
(a new room bound to it); then the runner check (what a runner will need: read the repository
and push a branch). The page's script keeps only a resume marker (the group id and when each
stage was reached); every stage shown is recomputed here from the store and the forge.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

import httpx
from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from cairn.api.deps import Served
from cairn.errors import CairnError, UsageError
from cairn.jobs.policy import require_group_admin
from cairn.store import credentials, identity
from cairn.store.records import Group, Role, User
from cairn.store.rooms import create_room, list_rooms
from cairn.web.access import CheckedForm, ForgeApp, PageUser, current_session, served_of, web_state
from cairn.web.render import error_page, page

router = APIRouter(include_in_schema=False)
Id = Annotated[int, Path(ge=1, le=2**31 - 1)]
NO_APP = (
    "no forge OAuth app is configured for this cairn server, so a repository cannot be "
    "authorized from the browser; an operator can connect one with `cairn room create --forge`"
)


def credential_name(group: Group) -> str:
    """The stored credential a group's forge authorization is kept under."""
    return f"oauth-{group.name}"[:64]


@router.get("/onboarding", response_class=HTMLResponse)
def onboarding(
    request: Request, user: PageUser, group: Annotated[int | None, Query(ge=1)] = None
) -> Response:
    """The stages, as the store and the forge say they stand now for `group`."""
    served = served_of(request)
    with served.store.begin() as conn:
        mine = [g for g, role in identity.memberships_of(conn, user.id) if role == Role.admin]
    chosen = next((g for g in mine if g.id == group), None)
    if group is not None and chosen is None:
        return error_page(request, 403, "you are not an admin of that group; choose one you are")
    state = _state(served, chosen) if chosen is not None else {}
    return page(
        request,
        "onboarding.html",
        groups=mine,
        group=chosen,
        forge=web_state(request).forge_app,
        **state,
    )


@router.get("/onboarding/{group_id}/status")
def status(request: Request, group_id: Id, user: PageUser) -> JSONResponse:
    """Whether the group's forge authorization is stored (what the waiting dialog polls)."""
    served = served_of(request)
    group = _admin_group(served, user, group_id)
    return JSONResponse({"connected": _state(served, group)["connected"]})


@router.get("/onboarding/{group_id}/authorize")
def authorize(request: Request, group_id: Id, user: PageUser) -> Response:
    """Send the authorization window to the forge, with a state bound to this session."""
    forge = web_state(request).forge_app
    if forge is None:
        return error_page(request, 404, NO_APP)
    _admin_group(served_of(request), user, group_id)
    session = current_session(request)
    assert session is not None, "signed_in found it"
    state = web_state(request).oauth_states.begin(session.id, group_id)
    query = urlencode(
        {"client_id": forge.client_id, "redirect_uri": _callback_url(request), "state": state}
    )
    return RedirectResponse(f"{forge.authorize_url}?{query}", status_code=303)


@router.get("/onboarding/callback", response_class=HTMLResponse)
def callback(
    request: Request,
    user: PageUser,
    state: Annotated[str, Query(max_length=200)] = "",
    code: Annotated[str, Query(max_length=400)] = "",
    error: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """Where the forge sends the window back: exchange the code and store the token."""
    session = current_session(request)
    group_id = web_state(request).oauth_states.finish(state, session.id) if session else None
    if group_id is None:
        return error_page(request, 400, "this authorization is unknown or expired; start again")
    forge = web_state(request).forge_app
    if forge is None:
        return error_page(request, 404, NO_APP)
    if error or not code:
        return page(request, "oauth_done.html", ok=False)
    served = served_of(request)
    group = _admin_group(served, user, group_id)
    token = _exchange(forge, code)
    with served.store.begin() as conn:
        cipher = credentials.CredentialCipher(_secret_key(served))
        credentials.set_credential(conn, credential_name(group), token, cipher)
    return page(request, "oauth_done.html", ok=True)


@router.post("/onboarding/{group_id}/room", dependencies=[CheckedForm])
def connect_room(
    request: Request,
    group_id: Id,
    user: PageUser,
    name: Annotated[str, Form(max_length=64)] = "",
    repository: Annotated[str, Form(max_length=200)] = "",
    base: Annotated[str, Form(max_length=200)] = "main",
) -> Response:
    """A new room bound to the forge repository, read with the group's stored authorization."""
    from cairn.forges.rooms import forge_binding, forge_scope

    served = served_of(request)
    forge = web_state(request).forge_app
    if forge is None:
        return error_page(request, 404, NO_APP)
    group = _admin_group(served, user, group_id)
    settings, scope = forge_scope(
        forge.kind, repository.strip(), forge.url, None, credential_name(group), "pull_request"
    )
    assert settings is not None, "a forge was named"
    with served.store.begin() as conn:
        require_group_admin(conn, group, user.name, "connect a room for it")
        location, branch = forge_binding(
            conn, settings, None, base.strip() or "main", served.config
        )
        create_room(
            conn, name=name.strip(), group_id=group.id, repo=location, base_branch=branch,
            scope=scope,
        )  # fmt: skip
    return RedirectResponse(f"/onboarding?group={group.id}", status_code=303)


def _state(served: Served, group: Group) -> dict[str, Any]:
    """Where the group's onboarding really stands: authorization, room, runner check."""
    from cairn.forges.rooms import check_room

    with served.store.begin() as conn:
        connected = credential_name(group) in credentials.credential_names(conn)
        rooms = [
            r for r in list_rooms(conn)
            if r.group_id == group.id and _uses(r.scope, credential_name(group))
        ]  # fmt: skip
        checks: list[dict[str, Any]] = []
        for room in rooms:
            try:
                report = check_room(conn, room.scope, room.base_branch, served.config)
                checks.append({"room": room.name, **report})
            except CairnError as exc:
                checks.append({"room": room.name, "ok": False, "checks": [], "error": str(exc)})
    stage = "check" if rooms else "repository" if connected else "authorize"
    return {"connected": connected, "rooms": rooms, "checks": checks, "stage": stage}


def _uses(scope: dict[str, Any], credential: str) -> bool:
    forge = scope.get("forge")
    return isinstance(forge, dict) and forge.get("credential") == credential


def _admin_group(served: Served, user: User, group_id: int) -> Group:
    with served.store.begin() as conn:
        group = identity.get_group(conn, group_id)
        require_group_admin(conn, group, user.name, "connect a repository for it")
    return group


def _secret_key(served: Served) -> str | None:
    key = served.config.secret_key
    return key.get_secret_value() if key else None


def _callback_url(request: Request) -> str:
    return str(request.url_for("callback"))


def _exchange(forge: ForgeApp, code: str) -> str:
    """The access token for an authorization code (the forge's token endpoint)."""
    try:
        answer = httpx.post(
            f"{forge.url}/login/oauth/access_token",
            data={"client_id": forge.client_id, "client_secret": forge.client_secret,
                  "code": code},
            headers={"Accept": "application/json"},
            timeout=30,
        )  # fmt: skip
        token = answer.json().get("access_token") if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        token = None
    if not isinstance(token, str) or not token:
        raise UsageError("the forge did not accept the authorization; authorize again")
    return token
