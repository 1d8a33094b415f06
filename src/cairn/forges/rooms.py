"""Rooms on a forge: the settings a new room stores, its binding, and the runner check.

The CLI (`cairn room create`, `cairn room check`, `cairn credential remove`), the web pages'
onboarding and the API all ask the same questions of a forge room, so the answers live here,
below every interface, and each interface only presents them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cairn.errors import ForgeError, UsageError

if TYPE_CHECKING:
    import sqlalchemy as sa

    from cairn.config import Config
    from cairn.forges import ForgeSettings


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


def check_room(
    conn: sa.Connection, scope: dict[str, Any], base: str, config: Config
) -> dict[str, Any]:
    """Whether a forge room's credential can read its repository and push a branch, line by line.

    A line that could not be checked is never reported fine: a runner that only learns at the
    end of a job that it cannot push has wasted the job.
    """
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


def rooms_naming(conn: sa.Connection, credential: str) -> list[str]:
    """The rooms naming stored `credential`: removing it would cut them off from their forge."""
    from cairn.forges import ForgeSettings
    from cairn.store.rooms import list_rooms

    named = []
    for room in list_rooms(conn):
        settings = ForgeSettings.from_scope(room.scope)
        if settings is not None and settings.credential == credential:
            named.append(room.name)
    return named


_API_PUSH = "push a branch, as the API reports it"
_GIT_PUSH = "push a cairn branch over git (dry run)"
_NOT_CHECKED = "not checked, as reading the repository failed first"


def _line(what: str, problem: str | None) -> dict[str, Any]:
    return {"what": what, "ok": problem is None, "checked": True, "why": problem}


def _unchecked(what: str) -> dict[str, Any]:
    return {"what": what, "ok": False, "checked": False, "why": _NOT_CHECKED}
