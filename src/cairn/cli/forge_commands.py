"""Rooms on a forge: their settings at creation, `cairn room check`, and stored credentials."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from cairn.cli.context import (
    AS_OPTION,
    JSON_OPTION,
    command_group,
    console,
    print_json,
    session,
)
from cairn.errors import ForgeError, InvalidState, UsageError

if TYPE_CHECKING:
    import sqlalchemy as sa

    from cairn.config import Config
    from cairn.forges import ForgeSettings

credential_app = command_group("Store forge credentials, encrypted with CAIRN_SECRET_KEY.")

FORGE_OPTION = typer.Option(None, "--forge", help="The room's forge: github or gitlab.")
FORGE_REPO_OPTION = typer.Option(None, "--forge-repo", help="The repository there: owner/name.")
FORGE_URL_OPTION = typer.Option(
    None, "--forge-url", help="The forge's web address (default https://github.com or gitlab.com)."
)
TOKEN_ENV_OPTION = typer.Option(
    None, "--forge-token-env", help="The environment variable holding the forge token."
)
CREDENTIAL_OPTION = typer.Option(
    None, "--forge-credential", help="A credential stored with `cairn credential set`."
)
DELIVERY_OPTION = typer.Option(
    None,
    "--delivery",
    help="push_and_merge (default), pull_request or pull_request_and_merge (need --forge).",
)


def forge_scope(
    forge: str | None,
    repo: str | None,
    url: str | None,
    token_env: str | None,
    credential: str | None,
    delivery: str | None,
) -> tuple[ForgeSettings | None, dict[str, Any]]:
    """A new room's forge settings and the scope entries that hold them."""
    from cairn.forges import Delivery, ForgeSettings, parse_delivery
    from cairn.forges.registry import SCOPE_KEY

    mode = parse_delivery(delivery)
    if forge is None:
        if any(v is not None for v in (repo, url, token_env, credential)):
            raise UsageError("--forge-repo, --forge-url and the token options need --forge")
        if mode != Delivery.push_and_merge:
            raise UsageError(f"--delivery {mode.value} needs a forge: pass --forge")
        return None, {}
    settings = ForgeSettings.parse(forge, repo, url=url, token_env=token_env, credential=credential)
    return settings, {SCOPE_KEY: settings.to_scope(), "delivery": mode.value}


def forge_binding(
    conn: sa.Connection,
    settings: ForgeSettings,
    repo: str | None,
    base: str | None,
    config: Config,
) -> tuple[str, str]:
    """A forge room's repository (the forge's git URL) and base branch, read with its token."""
    from cairn.forges.credentials import forge_token, secret_key
    from cairn.forges.git_access import probe_git

    if repo is not None and repo.rstrip("/") != settings.git_url:
        raise UsageError(
            f"with --forge the repository is {settings.git_url}; leave --repo out, or fix it"
        )
    token = forge_token(settings, environ=os.environ, conn=conn, secret_key=secret_key(config))
    branch = base or "main"
    found = probe_git(settings, token, branch, timeout=config.git_timeout, push=False)
    if found.problems:
        raise UsageError(f"{found.problems[0]}; `cairn room check` tells what is missing")
    return settings.git_url, branch


def room_check(
    ctx: typer.Context,
    name: str,
    as_json: bool = JSON_OPTION,
    as_user: str | None = AS_OPTION,
) -> None:
    """Check that the room's forge credential can read the repository and push a branch."""
    from cairn.jobs.policy import require_group_admin
    from cairn.store import identity
    from cairn.store.rooms import get_room

    s = session(ctx)
    with s.store() as store, store.begin() as conn:
        room = get_room(conn, name)
        owner = identity.get_group(conn, room.group_id)
        require_group_admin(conn, owner, s.actor(as_user), "check its rooms")
        report = _check(conn, room.scope, room.base_branch, s.config)
    if as_json:
        print_json(report)
    else:
        for line in report["checks"]:
            if line["ok"]:
                console.print(f"ok  {line['what']}")
            else:
                mark = "MISSING" if line["checked"] else "NOT CHECKED"
                console.print(f"{mark} {line['what']}: {line['why']}")
    if not report["ok"]:
        raise typer.Exit(1)


def _check(conn: sa.Connection, scope: dict[str, Any], base: str, config: Config) -> dict[str, Any]:
    from cairn.forges import ForgeSettings, get_forge
    from cairn.forges.credentials import forge_token, secret_key
    from cairn.forges.git_access import probe_git

    settings = ForgeSettings.from_scope(scope)
    if settings is None:
        raise UsageError("the room has no forge to check; create it with --forge")
    token = forge_token(settings, environ=os.environ, conn=conn, secret_key=secret_key(config))
    checks: list[dict[str, Any]] = []
    try:
        access = get_forge(settings, token, timeout=config.git_timeout).check_access()
        api_problem = None if access.read else access.missing[0]
        push_problem = None if access.push else access.missing[0]
        # A token that cannot read gets no answer about pushing: not checked, never fine.
        push_line = _line(_API_PUSH, push_problem) if access.read else _unchecked(_API_PUSH)
    except ForgeError as exc:
        api_problem = str(exc)
        push_line = _unchecked(_API_PUSH)
    checks.append(_line(f"read {settings.repo} through the API", api_problem))
    checks.append(push_line)
    git = probe_git(settings, token, base, timeout=config.git_timeout)
    read_problem = next((p for p in git.problems if "push" not in p), None)
    push_git = next((p for p in git.problems if "push" in p), None)
    checks.append(_line(f"read branch {base} over git", read_problem))
    checks.append(_line(_GIT_PUSH, push_git) if git.push_checked else _unchecked(_GIT_PUSH))
    return {"room_forge": settings.kind, "ok": all(c["ok"] for c in checks), "checks": checks}


_API_PUSH = "push a branch, as the API reports it"
_GIT_PUSH = "push a cairn branch over git (dry run)"
_NOT_CHECKED = "not checked, as reading the repository failed first"


def _line(what: str, problem: str | None) -> dict[str, Any]:
    return {"what": what, "ok": problem is None, "checked": True, "why": problem}


def _unchecked(what: str) -> dict[str, Any]:
    return {"what": what, "ok": False, "checked": False, "why": _NOT_CHECKED}


@credential_app.command("set")
def credential_set(
    ctx: typer.Context,
    name: str,
    group: str = typer.Option("default", "--group", help="The group whose admin you are."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Store a forge token under NAME, encrypted; the token is read from standard input."""
    from cairn.forges.credentials import secret_key
    from cairn.jobs.policy import require_group_admin
    from cairn.store import identity
    from cairn.store.credentials import CredentialCipher, set_credential

    s = session(ctx)
    cipher = CredentialCipher(secret_key(s.config))
    # Never an argument: those show in `ps` and in shell history.
    interactive = sys.stdin.isatty()
    token = typer.prompt("token", hide_input=True) if interactive else sys.stdin.readline()
    with s.store() as store, store.begin() as conn:
        owner = identity.get_group(conn, group)
        require_group_admin(conn, owner, s.actor(as_user), "store forge credentials")
        set_credential(conn, name, token, cipher)
    console.print(f"credential {name} stored, encrypted; a room names it with --forge-credential")


@credential_app.command("remove")
def credential_remove(
    ctx: typer.Context,
    name: str,
    group: str = typer.Option("default", "--group", help="The group whose admin you are."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Remove stored credential NAME (a leaked or retired token); refused while a room names it."""
    from cairn.jobs.policy import require_group_admin
    from cairn.store import identity
    from cairn.store.credentials import remove_credential

    s = session(ctx)
    with s.store() as store, store.begin() as conn:
        owner = identity.get_group(conn, group)
        require_group_admin(conn, owner, s.actor(as_user), "remove forge credentials")
        users = _rooms_naming(conn, name)
        if users:
            raise InvalidState(
                f"credential {name} is still named by room {', '.join(users)}; those rooms "
                "would fail to reach their forge. Store the new token under the same name "
                "with `cairn credential set` instead, or remove it once no room names it"
            )
        remove_credential(conn, name)
    console.print(f"credential {name} removed")


def _rooms_naming(conn: sa.Connection, credential: str) -> list[str]:
    """The rooms whose forge credential is the stored `credential`."""
    from cairn.forges import ForgeSettings
    from cairn.store.rooms import list_rooms

    named = []
    for room in list_rooms(conn):
        settings = ForgeSettings.from_scope(room.scope)
        if settings is not None and settings.credential == credential:
            named.append(room.name)
    return named


@credential_app.command("list")
def credential_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the stored credentials' names (never their values)."""
    from cairn.store.credentials import credential_names

    with session(ctx).store() as store, store.begin() as conn:
        names = credential_names(conn)
    if as_json:
        print_json(names)
        return
    for name in names:
        console.print(name)
