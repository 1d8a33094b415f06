"""Effects on the room's repository: push the job's branch, merge it into the base branch.

Each effect can be inspected from outside (`remote_branch_sha`, `is_merged`), so a caller
that crashed between "intended" and "done" reconciles by looking instead of repeating.

Refs in a *local* repository are never moved by pushing into it: a push runs that
repository's receive hooks, which cairn's hardening cannot switch off across the local
transport. Instead cairn fetches from its mirror while running inside the repository, where
its hardened settings apply. Remote URLs are pushed to as usual; their hooks run on a server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cairn.errors import WorkspaceError
from cairn.workspace.git import (
    IDENTITY,
    LOCAL_TRANSPORT,
    GitError,
    check_branch_name,
    local_path,
    run_git,
    transport_address,
    transport_settings,
    try_git,
)
from cairn.workspace.mirror import Mirror, checked_out_base, checkout_changes

_LEFT_TO_A_PERSON = "the branch was delivered and the merge is left to a person"


@dataclass(frozen=True)
class MergeResult:
    """The outcome of merging a job's commit into the room's base branch."""

    merged: bool
    commit: str | None
    """The base branch's tip that contains the job's commit, when merged."""
    reason: str | None
    """Why the merge was left to a person, when not merged."""


def remote_branch_sha(repo: str, branch: str, *, timeout: float | None = None) -> str | None:
    """The sha `branch` points at in the repository `repo`, or None when it does not exist."""
    ref = f"refs/heads/{branch}"
    out = run_git(
        *transport_settings(repo), "ls-remote", "--", transport_address(repo), ref,
        cwd="/",  # a neutral folder: the caller's current folder may be any repository
        failure="git could not read the branches of the room's repository", timeout=timeout,
    )  # fmt: skip
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def push_branch(mirror: Mirror, sha: str, branch: str) -> None:
    """Publish `sha` as `branch` in the room's repository; never overwrites a different sha."""
    check_branch_name(branch)
    existing = remote_branch_sha(mirror.repo, branch, timeout=mirror.git_timeout)
    if existing == sha:
        return
    if existing is not None:
        raise WorkspaceError(
            f"the branch {branch!r} already exists in the room's repository at another commit; "
            "cairn does not overwrite branches, so rename or delete it and deliver again"
        )
    _publish(mirror, sha, f"refs/heads/{branch}", f"git could not push branch {branch!r}")


def is_merged(mirror: Mirror, sha: str) -> bool:
    """True when the base branch, freshly fetched, already contains `sha`."""
    return _is_ancestor(mirror, sha, mirror.fetch_baseline())


def merge_into_base(mirror: Mirror, sha: str, message: str) -> MergeResult:
    """Merge `sha` into the base branch of the room's repository, at most once."""
    base = mirror.base_branch
    with mirror.lock():
        # A second pass only when the base moved between our fetch and our update.
        for _attempt in range(2):
            tip = mirror.fetch_baseline()
            if _is_ancestor(mirror, sha, tip):
                return MergeResult(True, tip, None)
            if _is_ancestor(mirror, tip, sha):
                target: str | None = sha  # a fast-forward: no merge commit needed
            else:
                target = _merge_commit(mirror, tip, sha, message)
            if target is None:
                reason = f"the job's branch conflicts with newer changes on {base}; "
                return MergeResult(False, None, reason + _LEFT_TO_A_PERSON)
            outcome = _advance_base(mirror, tip, target)
            if outcome is not None:
                return outcome
    return MergeResult(False, None, f"{base} kept moving while cairn merged; {_LEFT_TO_A_PERSON}")


def _merge_commit(mirror: Mirror, tip: str, sha: str, message: str) -> str | None:
    """A merge commit of `sha` onto `tip` made in the mirror, or None on conflict."""
    result = try_git("merge-tree", "--write-tree", "--no-messages", tip, sha, cwd=mirror.path)
    if result.returncode == 1:
        return None
    if result.returncode != 0:
        raise GitError(
            "git could not compute the merge", detail=result.stderr, returncode=result.returncode
        )
    tree = result.stdout.splitlines()[0]
    return mirror.git(
        *IDENTITY, "commit-tree", tree, "-p", tip, "-p", sha, "-F", "-", input=message
    )


def _advance_base(mirror: Mirror, tip: str, target: str) -> MergeResult | None:
    """Move the base branch from `tip` to `target`; None means it moved meanwhile."""
    base = mirror.base_branch
    checkout = checked_out_base(mirror.repo, base)
    if checkout is not None:
        return _fast_forward_checkout(mirror, checkout, tip, target)
    try:
        _publish(mirror, target, f"refs/heads/{base}", f"git could not update {base!r}")
    except GitError:
        now = remote_branch_sha(mirror.repo, base, timeout=mirror.git_timeout)
        if now == target:  # the update landed though its report failed (a server-side hook)
            return MergeResult(True, target, None)
        if now != tip:
            return None
        reason = f"the room's repository refused to move {base}; {_LEFT_TO_A_PERSON}"
        return MergeResult(False, None, reason)
    return MergeResult(True, target, None)


def _fast_forward_checkout(
    mirror: Mirror, checkout: Path, tip: str, target: str
) -> MergeResult | None:
    """Fast-forward a person's checkout of the base branch, only when it is clean."""
    base = mirror.base_branch
    if checkout_changes(mirror.repo, base):
        return MergeResult(
            False,
            None,
            f"{base} is checked out with local changes in the room's repository, "
            "so cairn touched nothing there and left the merge to a person",
        )
    if run_git("rev-parse", "HEAD", cwd=checkout) != tip:
        return None
    # A hidden ref carries the objects in; git cannot fetch into the checked-out branch.
    hidden = f"refs/cairn/merge/{target}"
    _publish(mirror, target, hidden, f"git could not bring the merge into {base!r}")
    try:
        merged = try_git(
            *IDENTITY, "merge", "--ff-only", "--quiet", "--no-autostash",
            "--no-overwrite-ignore", target, cwd=checkout,
        )  # fmt: skip
    finally:
        try_git("update-ref", "-d", hidden, cwd=checkout)
    if merged.returncode == 0:
        return MergeResult(True, target, None)
    if run_git("rev-parse", "HEAD", cwd=checkout) != tip:
        return None
    return MergeResult(
        False,
        None,
        f"{base}'s checkout could not be fast-forwarded without overwriting files there; "
        "the merge is left to a person",
    )


def _publish(mirror: Mirror, sha: str, ref: str, failure: str) -> None:
    """Point `ref` in the room's repository at `sha` from the mirror, never forcing."""
    failure = f"{failure} in the room's repository"
    target = local_path(mirror.repo)
    if target is None:
        address = transport_address(mirror.repo)
        mirror.git(
            "push", "--quiet", "--no-verify", "--", address, f"{sha}:{ref}",
            failure=failure, timeout=mirror.git_timeout,
        )  # fmt: skip
        return
    # Runs inside the person's repository, whose config is not cairn's: the file protocol only,
    # so its `url.*.insteadOf` cannot turn this into an ssh call running its `core.sshCommand`.
    run_git(
        *LOCAL_TRANSPORT,
        "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
        "--", str(mirror.path.absolute()), f"{sha}:{ref}",
        cwd=target, failure=failure, timeout=mirror.git_timeout,
    )  # fmt: skip


def _is_ancestor(mirror: Mirror, ancestor: str, descendant: str) -> bool:
    result = try_git("merge-base", "--is-ancestor", ancestor, descendant, cwd=mirror.path)
    if result.returncode not in (0, 1):
        raise GitError(
            "git could not compare the job's commit with the base branch",
            detail=result.stderr,
            returncode=result.returncode,
        )
    return result.returncode == 0
