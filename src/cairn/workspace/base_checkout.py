"""Lock files a stopped git left in a local room repository, named for a person to clear.

cairn fast-forwards a person's checkout of the base branch with `git merge --ff-only` (see
`delivery`), carrying the commit in under a hidden ref first (`merge_carrier`). A runner
killed in the middle can leave git's lock files there, and every later git refuses to run
while they are. cairn never removes locks in a repository it does not own (a git of the
person's may be holding them): they are named, with what to do, instead.

A checkout a kill left halfway (files and index moved, branch not) is not finished by cairn:
a leftover carrier ref does not prove the state is cairn's (a person's `merge --squash` or
`reset --soft` produces the same), so it is left to the person.
"""

from __future__ import annotations

from pathlib import Path

from cairn.workspace.git import git_folders, local_path

_CARRIERS = "refs/cairn/merge/"


def merge_carrier(target: str) -> str:
    """The hidden ref that carries `target` into the room's repository for a fast-forward."""
    return f"{_CARRIERS}{target}"


def stopped_git_advice(repo: str, base_branch: str) -> str | None:
    """What to tell a person about the lock files in a local room repository that make git
    refuse to change its checkout's index or move the base branch (named relative to its git
    folder); None when there are none, or the repository is remote."""
    path = local_path(repo)
    folders = git_folders(path) if path is not None and path.is_dir() else None
    if folders is None:
        return None
    own, common = folders
    # A linked worktree's index and HEAD live in a folder of its own inside the common one
    # (`worktrees/<name>`): named from the common folder, each lock says where it is.
    inside = own.relative_to(common) if own.is_relative_to(common) else Path()
    names = [inside / lock for lock in ("index.lock", "HEAD.lock", "ORIG_HEAD.lock")]
    names += [Path("refs", "heads", f"{base_branch}.lock"), Path("packed-refs.lock")]
    locks = [name.as_posix() for name in names if (common / name).exists()]
    if not locks:
        return None
    where = "git folder" if own == common else "main git folder (its worktrees share it)"
    return (
        f"A git that was stopped midway left {', '.join(locks)} in the repository's {where}; "
        "if no git is running there, delete those files"
    )
