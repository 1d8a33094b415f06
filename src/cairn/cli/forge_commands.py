"""`cairn room check` and stored forge credentials; the forge room logic is cairn.forges.rooms."""

from __future__ import annotations

import sys
from urllib.parse import quote

import typer

from cairn.cli.context import (
    AS_OPTION,
    JSON_OPTION,
    command_group,
    console,
    print_json,
    session,
)

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


def room_check(
    ctx: typer.Context,
    name: str,
    as_json: bool = JSON_OPTION,
    as_user: str | None = AS_OPTION,
) -> None:
    """Check that the room's forge credential can read the repository and push a branch."""
    from cairn.forges.rooms import check_room
    from cairn.jobs.policy import require_group_admin
    from cairn.store import identity
    from cairn.store.rooms import get_room

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        report = remote.get(f"/api/rooms/{quote(name, safe='')}/check")
    else:
        with s.store() as store, store.begin() as conn:
            room = get_room(conn, name)
            owner = identity.get_group(conn, room.group_id)
            require_group_admin(conn, owner, s.actor(as_user), "check its rooms")
            report = check_room(conn, room.scope, room.base_branch, s.config)
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


@credential_app.command("set")
def credential_set(
    ctx: typer.Context,
    name: str,
    group: str = typer.Option("default", "--group", help="The group whose admin you are."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Store a forge token under NAME, encrypted; the token is read from standard input."""
    from cairn.jobs.forge_credentials import store_credential

    s = session(ctx)
    remote = s.client(as_user)
    # Never an argument: those show in `ps` and in shell history.
    interactive = sys.stdin.isatty()
    token = typer.prompt("token", hide_input=True) if interactive else sys.stdin.readline()
    if remote is not None:
        remote.post("/api/credentials", {"name": name, "group": group, "secret": token})
    else:
        with s.store() as store, store.begin() as conn:
            store_credential(
                conn, name, token, group=group, actor=s.actor(as_user), config=s.config
            )
    console.print(f"credential {name} stored, encrypted; a room names it with --forge-credential")


@credential_app.command("remove")
def credential_remove(
    ctx: typer.Context,
    name: str,
    group: str = typer.Option("default", "--group", help="The group whose admin you are."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Remove stored credential NAME (a leaked or retired token); refused while a room names it."""
    from urllib.parse import quote

    from cairn.jobs.forge_credentials import drop_credential

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        remote.delete(f"/api/credentials/{quote(name, safe='')}?group={quote(group, safe='')}")
    else:
        with s.store() as store, store.begin() as conn:
            drop_credential(conn, name, group=group, actor=s.actor(as_user))
    console.print(f"credential {name} removed")


@credential_app.command("list")
def credential_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the stored credentials' names (never their values)."""
    from cairn.store.credentials import credential_names

    remote = session(ctx).client()
    if remote is not None:
        names = [str(n) for n in remote.get("/api/credentials")]
    else:
        with session(ctx).store() as store, store.begin() as conn:
            names = credential_names(conn)
    if as_json:
        print_json(names)
        return
    for name in names:
        console.print(name)
