"""Effects on the room's repository: push the job's branch, merge it into the base branch.

Each effect can be inspected from outside (`is_pushed`, `is_merged`), so a caller
that crashed between "intended" and "done" reconciles by looking instead of repeating.

Refs in a *local* repository are never moved by pushing into it: a push runs that
repository's receive hooks, which cairn's hardening cannot switch off across the local
transport. Instead cairn fetches from its mirror while running inside the repository, where
its hardened settings apply. Remote URLs are pushed to as usual; their hooks run on a server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cairn.errors import WorkspaceError
from cairn.workspace.askpass import NO_CREDENTIAL_HELPERS, GitCredential, credential_environment
from cairn.workspace.base_checkout import (
    merge_carrier,
    stopped_git_advice,
)
from cairn.workspace.git import (
    IDENTITY,
    LOCAL_TRANSPORT,
    GitError,
    check_branch_name,
    git_folders,
    local_path,
    run_git,
    transport_address,
    transport_settings,
    try_git,
)
from cairn.workspace.git_locks import DEAD_AFTER, clear_stale
from cairn.workspace.mirror import Mirror, checked_out_base, checkout_changes

_HIDDEN = "refs/cairn/"
"""Where cairn keeps the refs that carry a commit into a local repository for a moment."""


class BranchTaken(WorkspaceError):
    """The room's repository has a branch of the job's name at a commit that is not the job's."""


@dataclass(frozen=True)
class MergeResult:
    """The outcome of merging a job's commit into the room's base branch."""

    merged: bool
    commit: str | None
    """The base branch's tip that contains the job's commit, when merged."""
    reason: str | None
    """Why the merge was left to a person, when not merged."""


def remote_branch_sha(
    repo: str,
    branch: str,
    *,
    timeout: float | None = None,
    credential: GitCredential | None = None,
) -> str | None:
    """The sha `branch` points at in the repository `repo`, or None when it does not exist."""
    ref = f"refs/heads/{branch}"
    login = NO_CREDENTIAL_HELPERS if credential else ()
    with credential_environment(credential) as env:
        out = run_git(
            *login, *transport_settings(repo), "ls-remote", "--", transport_address(repo), ref,
            cwd="/",  # a neutral folder: the caller's current folder may be any repository
            env=env, failure="git could not read the branches of the room's repository",
            timeout=timeout,
        )  # fmt: skip
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def is_pushed(
    repo: str,
    branch: str,
    sha: str,
    *,
    timeout: float | None = None,
    credential: GitCredential | None = None,
) -> bool:
    """Whether `branch` in `repo` is `sha`; BranchTaken when it exists at any other commit."""
    existing = remote_branch_sha(repo, branch, timeout=timeout, credential=credential)
    if existing not in (None, sha):
        raise BranchTaken(
            f"a branch named {branch} already exists in the room's repository at a commit that "
            "is not this job's; cairn neither adopts nor overwrites it"
        )
    return existing == sha


def push_branch(mirror: Mirror, sha: str, branch: str) -> None:
    """Create `branch` at `sha` in the room's repository; an existing branch is never moved."""
    check_branch_name(branch)
    if is_pushed(
        mirror.repo, branch, sha, timeout=mirror.git_timeout, credential=mirror.credential
    ):
        return
    try:
        _create_branch(mirror, sha, f"refs/heads/{branch}", f"git could not push branch {branch}")
    except GitError:
        # Refused because the branch appeared meanwhile: say whose it is, never move it.
        if is_pushed(
            mirror.repo, branch, sha, timeout=mirror.git_timeout, credential=mirror.credential
        ):
            return
        raise


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
                reason = f"the job's branch conflicts with newer changes on {base}"
                return MergeResult(False, None, reason)
            outcome = _advance_base(mirror, tip, target)
            if outcome is not None:
                return outcome
    return MergeResult(False, None, f"{base} kept moving while cairn merged")


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
    except GitError as exc:
        now = remote_branch_sha(
            mirror.repo, base, timeout=mirror.git_timeout, credential=mirror.credential
        )
        if now == target:  # the update landed though its report failed (a server-side hook)
            return MergeResult(True, target, None)
        if now != tip:
            return None
        if "checked out at" in exc.detail:  # git names the other worktree's path: not shown
            return MergeResult(
                False, None, f"{base} is checked out in another worktree of the room's repository"
            )
        advice = stopped_git_advice(mirror.repo, base)
        said = f". {advice}" if advice else ""
        return MergeResult(False, None, f"the room's repository refused to move {base}{said}")
    return MergeResult(True, target, None)


def _fast_forward_checkout(
    mirror: Mirror, checkout: Path, tip: str, target: str
) -> MergeResult | None:
    """Fast-forward a person's checkout of the base branch, only when it is clean."""
    base = mirror.base_branch
    if checkout_changes(mirror.repo, base):
        advice = stopped_git_advice(mirror.repo, base)
        return MergeResult(
            False,
            None,
            f"{base} is checked out with local changes in the room's repository, and cairn "
            "touched nothing there" + (f". {advice}" if advice else ""),
        )
    if run_git("rev-parse", "HEAD", cwd=checkout) != tip:
        return None
    # A hidden ref carries the objects in; git cannot fetch into the checked-out branch.
    hidden = merge_carrier(target)
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
    advice = stopped_git_advice(mirror.repo, base)
    if advice:
        return MergeResult(False, None, f"{base}'s checkout could not be moved. {advice}")
    return MergeResult(
        False,
        None,
        f"{base}'s checkout could not be fast-forwarded without overwriting files there",
    )


def _create_branch(mirror: Mirror, sha: str, ref: str, failure: str) -> None:
    """Create `ref` at `sha` in the room's repository; refused, untouched, when it exists."""
    target = local_path(mirror.repo)
    if target is None:
        address = transport_address(mirror.repo)
        # An empty lease: the push lands only where no such ref exists yet.
        mirror.remote_git(
            "push", "--quiet", "--no-verify", f"--force-with-lease={ref}:",
            "--", address, f"{sha}:{ref}", failure=f"{failure} to the room's repository",
            cwd=mirror.path, timeout=mirror.git_timeout,
        )  # fmt: skip
        return
    # A fetch would fast-forward a branch that exists; `update-ref` with an empty old value
    # creates it or fails. A hidden ref carries the objects in first.
    hidden = f"{_HIDDEN}push/{sha}"
    _publish(mirror, sha, hidden, failure)
    try:
        _past_dead_lock(
            target,
            ref,
            lambda: run_git(
                "update-ref", "-m", "cairn: push", ref, sha, "",
                cwd=target, failure=f"{failure} in the room's repository",
            ),
        )  # fmt: skip
    finally:
        try_git("update-ref", "-d", hidden, cwd=target)


def _publish(mirror: Mirror, sha: str, ref: str, failure: str) -> None:
    """Point `ref` in the room's repository at `sha` from the mirror, never forcing."""
    failure = f"{failure} in the room's repository"
    target = local_path(mirror.repo)
    if target is None:
        address = transport_address(mirror.repo)
        mirror.remote_git(
            "push", "--quiet", "--no-verify", "--", address, f"{sha}:{ref}",
            cwd=mirror.path, failure=failure, timeout=mirror.git_timeout,
        )  # fmt: skip
        return

    # Runs inside the person's repository, whose config is not cairn's: the file protocol only,
    # so its `url.*.insteadOf` cannot turn this into an ssh call running its `core.sshCommand`.
    def fetch() -> None:
        run_git(
            *LOCAL_TRANSPORT,
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            "--", str(mirror.path.absolute()), f"{sha}:{ref}",
            cwd=target, failure=failure, timeout=mirror.git_timeout,
        )  # fmt: skip

    if ref.startswith(_HIDDEN):
        _past_dead_lock(target, ref, fetch)
    else:
        fetch()


def _past_dead_lock(repository: Path, ref: str, write: Callable[[], object]) -> None:
    """Run `write`, which sets one of cairn's own refs in a local repository; when it fails
    because a killed cairn left that ref locked, clear the lock and run it once more.

    Hidden refs (one per commit) and a job's branch (its name unique to the installation and
    the job) are cairn's own, written only by the runner delivering that job: a left lock (its
    git SIGKILLed with the runner) would fail every retry of the delivery. The lock is looked
    for where git keeps the ref (the common git folder, also of a linked worktree), and only
    after a failure. Other locks in a person's repository are never touched.
    """
    try:
        write()
    except GitError:
        folders = git_folders(repository)
        if folders is None or not clear_stale([folders[1] / f"{ref}.lock"], DEAD_AFTER):
            raise
        write()


def _is_ancestor(mirror: Mirror, ancestor: str, descendant: str) -> bool:
    result = try_git("merge-base", "--is-ancestor", ancestor, descendant, cwd=mirror.path)
    if result.returncode not in (0, 1):
        raise GitError(
            "git could not compare the job's commit with the base branch",
            detail=result.stderr,
            returncode=result.returncode,
        )
    return result.returncode == 0
