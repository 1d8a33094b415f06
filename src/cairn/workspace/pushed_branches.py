"""A job branch cairn pushed to a room's repository: may it go, and deleting it if so.

cairn deletes only what it can prove is its own and finished: the branch still points at the
commit cairn pushed (compared again at the moment of deletion), that commit is merged into
the base branch, and no checkout of the repository has the branch checked out.
"""

from __future__ import annotations

from cairn.workspace.askpass import NO_CREDENTIAL_HELPERS, credential_environment
from cairn.workspace.delivery import is_merged, remote_branch_sha
from cairn.workspace.git import (
    LOCAL_TRANSPORT,
    check_branch_name,
    local_path,
    run_git,
    transport_address,
    try_git,
)
from cairn.workspace.mirror import Mirror


def branch_tip(mirror: Mirror, branch: str) -> str | None:
    """Where `branch` points in the room's repository now, or None when it is gone."""
    return remote_branch_sha(
        mirror.repo, branch, timeout=mirror.git_timeout, credential=mirror.credential
    )


def why_keep(mirror: Mirror, branch: str, pushed: str, tip: str) -> str | None:
    """Why `branch` (now at `tip`, pushed at `pushed`) must stay, or None when it may go."""
    check_branch_name(branch)
    if branch == mirror.base_branch:
        return "it is the room's base branch"
    if tip != pushed:
        return "it moved since cairn pushed it"
    with mirror.lock():
        if not is_merged(mirror, pushed):
            return f"it is not merged into {mirror.base_branch}"
    if _checked_out(mirror, branch):
        return "it is checked out in the room's repository"
    return None


def delete_branch(mirror: Mirror, branch: str, pushed: str) -> str | None:
    """Delete `branch` from the room's repository if it still points at `pushed`.

    Returns `pushed` once the branch is gone, None when it had moved (and was kept).
    """
    check_branch_name(branch)
    ref = f"refs/heads/{branch}"
    target = local_path(mirror.repo)
    if target is None:
        address = transport_address(mirror.repo)
        login = NO_CREDENTIAL_HELPERS if mirror.credential else ()
        with credential_environment(mirror.credential) as env:
            result = try_git(
                *login, "push", "--quiet", "--no-verify", f"--force-with-lease={ref}:{pushed}",
                "--", address, f":{ref}",
                cwd=mirror.path, env=env, timeout=mirror.git_timeout,
            )  # fmt: skip
    else:
        # Never a push into a local repository (its receive hooks would run): the ref is
        # deleted in place, compare-and-delete against the commit cairn pushed.
        result = try_git(*LOCAL_TRANSPORT, "update-ref", "-d", ref, pushed, cwd=target)
    if result.returncode == 0:
        return pushed
    return pushed if branch_tip(mirror, branch) is None else None


def _checked_out(mirror: Mirror, branch: str) -> bool:
    target = local_path(mirror.repo)
    if target is None:
        return False  # a remote repository has no checkouts cairn could break
    listing = run_git(
        "worktree", "list", "--porcelain", cwd=target,
        failure="git could not list the checkouts of the room's repository",
    )  # fmt: skip
    return f"branch refs/heads/{branch}" in listing.splitlines()
