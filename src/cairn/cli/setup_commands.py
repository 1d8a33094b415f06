"""Setting cairn up: the home, users and rooms."""

from __future__ import annotations

from pathlib import Path

import typer

from cairn.cli.context import JSON_OPTION, console, print_json, session
from cairn.errors import UsageError
from cairn.store import identity
from cairn.store.rooms import create_room, list_rooms
from cairn.workspace.delivery import remote_branch_sha

user_app = typer.Typer(help="Manage users.", no_args_is_help=True)
room_app = typer.Typer(
    help="Manage rooms (a repository and base branch for a group).", no_args_is_help=True
)


def init(ctx: typer.Context) -> None:
    """Create the cairn home and store, group `default` and admin user `admin`."""
    s = session(ctx)
    s.config.home.mkdir(parents=True, exist_ok=True)
    with s.store(create=True) as store, store.begin() as conn:
        if identity.find_user(conn, "admin") is not None:
            console.print("cairn is already set up here; nothing changed.")
            return
        group = identity.add_group(conn, "default")
        admin = identity.add_user(conn, "admin")
        identity.set_membership(conn, group.id, admin.id, "admin")
    console.print("cairn is ready: group default with admin user admin.")


@user_app.command("add")
def user_add(
    ctx: typer.Context,
    name: str,
    admin: bool = typer.Option(False, "--admin", help="Make the user an admin of the group."),
    group: str = typer.Option("default", "--group", help="The group to add the user to."),
) -> None:
    """Add a user to a group, as a member (or an admin with --admin)."""
    with session(ctx).store() as store, store.begin() as conn:
        found = identity.get_group(conn, group)
        user = identity.add_user(conn, name)
        identity.set_membership(conn, found.id, user.id, "admin" if admin else "member")
    console.print(f"user {name} added to group {group} as {'admin' if admin else 'member'}")


@room_app.command("create")
def room_create(
    ctx: typer.Context,
    name: str,
    repo: str = typer.Option(..., "--repo", help="The repository: a local path or a URL."),
    base: str | None = typer.Option(None, "--base", help="The base branch (default: main)."),
    verify: str | None = typer.Option(None, "--verify", help="A command that checks a result."),
    group: str = typer.Option("default", "--group", help="The group that owns the room."),
) -> None:
    """Bind a new room to a repository and base branch."""
    location = _repository(repo)
    branch = base or "main"
    if remote_branch_sha(location, branch) is None:
        raise UsageError(f"the repository has no branch {branch!r}; pass the right one with --base")
    with session(ctx).store() as store, store.begin() as conn:
        owner = identity.get_group(conn, group)
        create_room(
            conn,
            name=name,
            group_id=owner.id,
            repo=location,
            base_branch=branch,
            verify_command=verify,
        )
    console.print(f"room {name} created on branch {branch}")


@room_app.command("list")
def room_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the rooms."""
    with session(ctx).store() as store, store.begin() as conn:
        rooms = [
            {"name": r.name, "base": r.base_branch, "verify": r.verify_command}
            for r in list_rooms(conn)
        ]
    if as_json:
        print_json(rooms)
        return
    for room in rooms:
        console.print(f"{room['name']}  (base {room['base']})")


def _repository(repo: str) -> str:
    if "://" in repo or repo.startswith("git@"):
        return repo
    path = Path(repo).expanduser()
    if not (path / ".git").exists() and not (path / "HEAD").exists():
        raise UsageError(
            f"{path.name or repo} is not a git repository; pass a repository's path or URL"
        )
    return str(path.resolve())
