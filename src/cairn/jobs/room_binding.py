"""Creating and rebinding rooms, for the CLI on the cairn host and for the API.

Both interfaces ask the same questions (who may, which repository, which branch), so the
answers live here. They differ in one thing: on the host a room's repository may be a path on
its disk, while a caller of the API acts from elsewhere and must never name the server's
files or the server's environment, so `remote=True` admits only a forge repository read with
a stored credential, or a remote git URL.
"""

from __future__ import annotations

import contextlib
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from cairn.config import Config
from cairn.errors import UsageError, WorkspaceError
from cairn.forges.rooms import forge_binding, forge_scope
from cairn.jobs.policy import require_group_admin
from cairn.store import agents, identity
from cairn.store.rooms import create_room, get_room, rebind_room

# A host never starts with "-": git would read it as an option of the transport it runs.
REMOTE_URL = re.compile(r"^(https?|ssh|git)://[\w\[][^/\s]*|^\w[\w.-]*@\w[\w.-]*:\S")
HOST_ONLY = (
    "through the API a room's repository is a forge repository (--forge, --forge-repo) or a "
    "remote git URL (https:// or ssh); a local path or file:// URL names the cairn host's "
    "disk, so create or rebind such a room on the cairn host itself"
)
HOST_TOKEN_ENV = (
    "through the API a forge room's token comes from a credential stored with `cairn "
    "credential set` (--forge-credential); --forge-token-env names the server's environment, "
    "so use it on the cairn host itself"
)


@dataclass(frozen=True)
class ForgeOptions:
    """The forge a new room is on, as `cairn room create` takes it (all None: no forge)."""

    forge: str | None = None
    repo: str | None = None
    url: str | None = None
    token_env: str | None = None
    credential: str | None = None
    delivery: str | None = None


@dataclass(frozen=True)
class NewRoom:
    """What a room was created with, for the interface to say."""

    name: str
    branch: str
    forge: str | None
    """`kind owner/name` for a forge room."""
    agent: str | None


def create_room_as(
    conn: sa.Connection,
    config: Config,
    *,
    actor: str,
    name: str,
    group: str,
    repo: str | None,
    base: str | None,
    verify: str | None,
    agent: str | None,
    forge: ForgeOptions,
    remote: bool,
    reaching: AbstractContextManager[object] | None = None,
) -> NewRoom:
    """Bind a new room to a repository and base branch; only an admin of the group decides."""
    if remote and forge.token_env is not None:
        raise UsageError(HOST_TOKEN_ENV)
    settings, scope = forge_scope(
        forge.forge, forge.repo, forge.url, forge.token_env, forge.credential, forge.delivery
    )
    owner = identity.get_group(conn, group)
    require_group_admin(conn, owner, actor, "create a room for it")
    default = agents.get_agent(conn, agents.check_name(agent)).name if agent else None
    if settings is None:
        if repo is None:
            raise UsageError("name the room's repository with --repo (or a forge: --forge)")
        location, branch = probe_repository(repo, base, config, remote=remote, reaching=reaching)
    else:
        location, branch = forge_binding(conn, settings, repo, base, config)
    create_room(
        conn,
        name=name,
        group_id=owner.id,
        repo=location,
        base_branch=branch,
        verify_command=verify,
        default_agent=default,
        scope=scope,
    )
    on = f"{settings.kind} {settings.repo}" if settings else None
    return NewRoom(name=name, branch=branch, forge=on, agent=default)


def rebind_room_as(
    conn: sa.Connection,
    config: Config,
    *,
    actor: str,
    name: str,
    repo: str,
    base: str | None,
    remote: bool,
    reaching: AbstractContextManager[object] | None = None,
) -> str:
    """Bind a room to another repository or branch (its group's admin); the branch it now has.

    A forge room stays on its forge: its repository is read with the room's own credential.
    """
    from cairn.forges import ForgeSettings

    room = get_room(conn, name)
    owner = identity.get_group(conn, room.group_id)
    require_group_admin(conn, owner, actor, "rebind its rooms")
    settings = ForgeSettings.from_scope(room.scope)
    if settings is None:
        location, branch = probe_repository(repo, base, config, remote=remote, reaching=reaching)
    else:
        location, branch = forge_binding(conn, settings, repo, base, config)
    rebind_room(conn, room.id, repo=location, base_branch=branch)
    return branch


def probe_repository(
    repo: str,
    base: str | None,
    config: Config,
    *,
    remote: bool,
    reaching: AbstractContextManager[object] | None = None,
) -> tuple[str, str]:
    """The repository's location and base branch, once git has found the branch there."""
    from cairn.workspace.delivery import remote_branch_sha
    from cairn.workspace.git import GitTimeout

    location = repository(repo, remote=remote)
    branch = base or "main"
    try:
        with reaching or contextlib.nullcontext():
            tip = remote_branch_sha(location, branch, timeout=config.git_timeout)
    except GitTimeout as exc:
        raise UsageError(str(exc)) from None  # it says already what to check
    except WorkspaceError as exc:
        # The repository named on the command line cannot be read: bad input, as a bad path is.
        raise UsageError(f"{exc}; check --repo") from None
    if tip is None:
        raise UsageError(f"the repository has no branch {branch!r}; pass the right one with --base")
    return location, branch


def repository(repo: str, *, remote: bool) -> str:
    """Where git finds `repo`: a URL as given, a local path resolved (on the host only)."""
    if remote:
        if not REMOTE_URL.match(repo) or repo.lower().startswith("file:"):
            raise UsageError(HOST_ONLY)  # never the path itself: it is the server's business
        return repo
    if "://" in repo or repo.startswith("git@"):
        return repo
    path = Path(repo).expanduser()
    if not (path / ".git").exists() and not (path / "HEAD").exists():
        raise UsageError(
            f"{path.name or repo} is not a git repository; pass a repository's path or URL"
        )
    return str(path.resolve())
