"""Setting cairn up: the home, its first group and admin, and rooms."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import typer

from cairn.cli import forge_commands as forge_options
from cairn.cli.authority_commands import AUTO_KINDS, RUN_APPROVAL, policy_settings
from cairn.cli.context import (
    AS_OPTION,
    JSON_OPTION,
    command_group,
    console,
    errors,
    print_json,
    session,
)
from cairn.errors import UsageError

if TYPE_CHECKING:
    from cairn.jobs.room_binding import ForgeOptions

room_app = command_group("Manage rooms (a repository and base branch for a group).")
SOLO_HINT = (
    "A run waits for an admin other than its requester (run_approval=admin). Add a second "
    "admin with `cairn user add NAME --admin`, or let the policy approve your own interactive "
    "runs: `cairn group policy default --run-approval auto --auto-kinds interactive`."
)


def init(
    ctx: typer.Context,
    run: str | None = RUN_APPROVAL,
    kinds: str | None = AUTO_KINDS,
) -> None:
    """Create the cairn home and store, group `default` and its admin user `admin`."""
    from cairn.jobs.policy import GroupPolicy
    from cairn.store import database, identity

    s = session(ctx)
    policy = GroupPolicy.parse(policy_settings(run, kinds, None, None))
    database.create_home(s.config.home)
    with s.store(create=True) as store, store.begin() as conn:
        if identity.find_user(conn, "admin") is not None:
            console.print("cairn is already set up here; nothing changed.")
            return
        group = identity.add_group(conn, "default", policy.to_dict())
        admin = identity.add_user(conn, "admin")
        identity.set_membership(conn, group.id, admin.id, "admin")
    console.print(f"cairn is ready: group default with admin user admin ({policy.describe()}).")
    if not policy.auto_approves("interactive"):
        console.print(SOLO_HINT)
    console.print("`cairn user token admin` gives admin an API token.")


@room_app.command("create")
def room_create(
    ctx: typer.Context,
    name: str,
    repo: str | None = typer.Option(
        None, "--repo", help="The repository: a local path or a URL (with --forge: the forge's)."
    ),
    base: str | None = typer.Option(None, "--base", help="The base branch (default: main)."),
    verify: str | None = typer.Option(None, "--verify", help="A command that checks a result."),
    group: str = typer.Option("default", "--group", help="The group that owns the room."),
    agent: str | None = typer.Option(
        None, "--agent", help="A named agent that jobs submitted without --agent use."
    ),
    forge: str | None = forge_options.FORGE_OPTION,
    forge_repo: str | None = forge_options.FORGE_REPO_OPTION,
    forge_url: str | None = forge_options.FORGE_URL_OPTION,
    forge_token_env: str | None = forge_options.TOKEN_ENV_OPTION,
    forge_credential: str | None = forge_options.CREDENTIAL_OPTION,
    delivery: str | None = forge_options.DELIVERY_OPTION,
    as_user: str | None = AS_OPTION,
) -> None:
    """Bind a new room to a repository and base branch (an admin of the group decides)."""
    from cairn.jobs.room_binding import ForgeOptions, NewRoom, create_room_as

    s = session(ctx)
    remote = s.client(as_user)
    on_forge = ForgeOptions(
        forge, forge_repo, forge_url, forge_token_env, forge_credential, delivery
    )
    if remote is not None:
        body = {"name": name, "group": group, "repo": repo, "base": base, "verify": verify}
        answer = remote.post("/api/rooms", _create_body(body | {"agent": agent}, on_forge))
        made = NewRoom(answer["name"], answer["base"], answer["forge"], answer["agent"])
    else:
        with s.store() as store, store.begin() as conn:
            made = create_room_as(
                conn,
                s.config,
                actor=s.actor(as_user),
                name=name,
                group=group,
                repo=repo,
                base=base,
                verify=verify,
                agent=agent,
                forge=on_forge,
                remote=False,
                reaching=_reaching(),
            )
    on = f" on {made.forge}" if made.forge else ""
    with_agent = f", default agent {made.agent}" if made.agent else ""
    console.print(f"room {name} created{on}, on branch {made.branch}{with_agent}")


@room_app.command("set-agent")
def room_set_agent(
    ctx: typer.Context,
    name: str,
    agent: str | None = typer.Argument(None, help="The named agent (`cairn agent list`)."),
    clear: bool = typer.Option(False, "--clear", help="Remove the room's default agent."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Give a room a default agent for jobs submitted without --agent (an admin decides)."""
    from urllib.parse import quote

    from cairn.jobs.room_settings import set_room_agent

    if (agent is None) == (not clear):
        raise UsageError("name the room's default agent, or pass --clear to remove it")
    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        answer = remote.put(f"/api/rooms/{quote(name, safe='')}/agent", {"agent": agent})
        default = answer["agent"]
    else:
        with s.store() as store, store.begin() as conn:
            default = set_room_agent(conn, name, agent, s.actor(as_user))
    if default:
        console.print(f"room {name}: jobs submitted without --agent use agent {default}")
    else:
        console.print(f"room {name} has no default agent now; each job names its own")


@room_app.command("rebind")
def room_rebind(
    ctx: typer.Context,
    name: str,
    repo: str = typer.Option(..., "--repo", help="The repository: a local path or a URL."),
    base: str | None = typer.Option(None, "--base", help="The base branch (default: main)."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Bind a room to another repository or branch; jobs requested before then will block."""
    from urllib.parse import quote

    from cairn.jobs.room_binding import rebind_room_as

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        answer = remote.post(
            f"/api/rooms/{quote(name, safe='')}/rebind", {"repo": repo, "base": base}
        )
        branch = str(answer["base"])
    else:
        with s.store() as store, store.begin() as conn:
            branch = rebind_room_as(
                conn,
                s.config,
                actor=s.actor(as_user),
                name=name,
                repo=repo,
                base=base,
                remote=False,
                reaching=_reaching(),
            )
    console.print(f"room {name} now works on branch {branch}; jobs requested earlier will block")


@room_app.command("list")
def room_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the rooms."""
    from cairn.store import identity
    from cairn.store.rooms import list_rooms

    remote = session(ctx).client()
    if remote is not None:
        # The rooms of the token's user's groups, in the local list's shape.
        keys = ("name", "group", "base", "verify", "agent")
        rooms = [{key: room.get(key) for key in keys} for room in remote.get("/api/rooms")]
    else:
        with session(ctx).store() as store, store.begin() as conn:
            rooms = [
                {
                    "name": r.name,
                    "group": identity.get_group(conn, r.group_id).name,
                    "base": r.base_branch,
                    "verify": r.verify_command,
                    "agent": r.default_agent,
                }
                for r in list_rooms(conn)
            ]
    if as_json:
        print_json(rooms)
        return
    for room in rooms:
        agent = f", agent {room['agent']}" if room["agent"] else ""
        console.print(f"{room['name']}  (group {room['group']}, base {room['base']}{agent})")


def _create_body(body: dict[str, str | None], forge: ForgeOptions) -> dict[str, str | None]:
    return body | {
        "forge": forge.forge,
        "forge_repo": forge.repo,
        "forge_url": forge.url,
        "forge_token_env": forge.token_env,
        "forge_credential": forge.credential,
        "delivery": forge.delivery,
    }


def _reaching() -> contextlib.AbstractContextManager[object] | None:
    # A spinner only where a person watches: piped output stays plain.
    return errors.status("reaching the repository") if errors.is_terminal else None
