"""A person's checkout of the base branch that a stopped git left halfway through a move.

cairn fast-forwards such a checkout with `git merge --ff-only` (see `delivery`), which writes
the index and the files first and moves the branch last. A runner killed in between leaves
the checkout holding the merge with its branch still at the old tip: to `git status`, staged
changes nobody made. The commit it was moving to is still named by the ref that carried it
in (`merge_carrier`), so cairn can tell that state from a person's work and finish the move.

Lock files a killed git left in the person's repository are never removed by cairn (a git of
the person's may be holding them): they are named, with what to do, instead.
"""

from __future__ import annotations

from pathlib import Path

from cairn.workspace.git import local_path, try_git
from cairn.workspace.mirror import checked_out_base

_CARRIERS = "refs/cairn/merge/"


def merge_carrier(target: str) -> str:
    """The hidden ref that carries `target` into the room's repository for a fast-forward."""
    return f"{_CARRIERS}{target}"


def finish_interrupted_fast_forward(repo: str, base_branch: str) -> str | None:
    """Finish a fast-forward of the base branch's checkout that stopped after writing the
    files; the commit the branch now points at, or None when there was none to finish.

    Finished only when the checkout is exactly one of cairn's carried commits (index and
    files) and that commit descends from the branch's tip: the state a fast-forward leaves
    between writing the files and moving the branch. The branch is moved with a
    compare-and-swap on that tip; when git refuses (a lock file the stopped git left: see
    `left_locks`), the checkout stays as it is. Carriers the branch already holds are deleted.
    """
    checkout = checked_out_base(repo, base_branch)
    if checkout is None:
        return None
    listed = try_git("for-each-ref", "--format=%(objectname)", _CARRIERS, cwd=checkout)
    carried = listed.stdout.split() if listed.returncode == 0 else []
    if not carried:
        return None
    head = try_git("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=checkout).stdout
    finished = None
    for target in carried:
        if target != head and _checkout_holds(checkout, head, target):
            moved = try_git(
                "update-ref", "-m", "cairn: finish a fast-forward a stopped git left halfway",
                f"refs/heads/{base_branch}", target, head, cwd=checkout,
            )  # fmt: skip
            if moved.returncode != 0:
                break
            head = finished = target
    for target in carried:
        if _contains(checkout, head, target):
            try_git("update-ref", "-d", merge_carrier(target), target, cwd=checkout)
    return finished


def left_locks(repo: str, base_branch: str) -> list[str]:
    """The lock files in a local room repository that make git refuse to change its checkout's
    index or move the base branch, relative to its git folder ([] for a remote one)."""
    path = local_path(repo)
    if path is None or not path.is_dir():
        return []
    found = try_git("rev-parse", "--absolute-git-dir", "--git-common-dir", cwd=path)
    if found.returncode != 0:
        return []
    own, common = (Path(line) for line in found.stdout.split("\n")[:2])
    common = common if common.is_absolute() else path / common
    names = [(own, "index.lock"), (own, "HEAD.lock"), (own, "ORIG_HEAD.lock")]
    names += [(common, f"refs/heads/{base_branch}.lock"), (common, "packed-refs.lock")]
    return [name for folder, name in names if (folder / name).exists()]


def locks_advice(locks: list[str]) -> str:
    """What to tell a person about `locks` (from `left_locks`)."""
    return (
        f"A git that was stopped midway left {', '.join(locks)} in the repository's git "
        "folder; if no git is running there, delete those files"
    )


def _checkout_holds(checkout: Path, head: str, target: str) -> bool:
    """Whether the index and the files are `target`'s and `target` descends from `head`."""
    if not _contains(checkout, target, head):
        return False
    staged = try_git("diff", "--cached", "--quiet", target, "--", cwd=checkout)
    if staged.returncode != 0:
        return False
    files = try_git("diff", "--quiet", target, "--", cwd=checkout)
    return files.returncode == 0


def _contains(checkout: Path, tip: str, commit: str) -> bool:
    """Whether `commit` is `tip` or one of its ancestors."""
    if not tip:
        return False
    result = try_git("merge-base", "--is-ancestor", commit, tip, cwd=checkout)
    return result.returncode == 0
