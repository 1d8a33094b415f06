"""Locks a killed fast-forward left in a room repository: named, never removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.testing.repos import kill_fast_forward_midway
from cairn.workspace.delivery import MergeResult, merge_into_base
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git
from .rooms import room_with_job_commit

_LOCKS = ("HEAD.lock", "refs/heads/main.lock")


@pytest.fixture
def job_sha(worktree: Worktree, baseline: str) -> str:
    (worktree.path / "docs").mkdir()
    (worktree.path / "docs" / "guide.md").write_text("# Guide\n")
    return worktree.commit(baseline, "Add a guide")


def test_the_locks_of_a_git_killed_moving_the_branch_are_named_and_left_in_place(
    mirror: Mirror, project: Path, job_sha: str, baseline: str
) -> None:
    kill_fast_forward_midway(project, mirror.path, job_sha)
    index = (project / ".git" / "index").read_bytes()

    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert not result.merged and result.reason is not None
    assert "HEAD.lock, refs/heads/main.lock" in result.reason
    assert "if no git is running there, delete those files" in result.reason
    assert str(project) not in result.reason
    assert all((project / ".git" / lock).exists() for lock in _LOCKS)
    assert (project / ".git" / "index").read_bytes() == index
    assert plain_git(project, "rev-parse", "HEAD") == baseline

    for lock in _LOCKS:  # what the message asks of the person
        (project / ".git" / lock).unlink()
    # A leftover carrier does not prove the state is cairn's (a person's merge --squash
    # makes the same): the staged files are left to the person, the branch where it was.
    again = merge_into_base(mirror, job_sha, "Merge job 1")
    assert not again.merged and again.reason is not None
    assert "checked out with local changes" in again.reason
    assert plain_git(project, "rev-parse", "HEAD") == baseline


def test_a_half_moved_checkout_that_a_person_edited_since_is_left_alone(
    mirror: Mirror, project: Path, job_sha: str, baseline: str
) -> None:
    kill_fast_forward_midway(project, mirror.path, job_sha)
    for lock in _LOCKS:
        (project / ".git" / lock).unlink()
    (project / "docs" / "guide.md").write_text("# Guide, edited by a person\n")

    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert not result.merged and result.reason is not None
    assert "checked out with local changes" in result.reason
    assert plain_git(project, "rev-parse", "HEAD") == baseline
    assert (project / "docs" / "guide.md").read_text() == "# Guide, edited by a person\n"
    assert plain_git(project, "for-each-ref", "--format=%(refname)", "refs/cairn/") == (
        f"refs/cairn/merge/{job_sha}"
    )


def test_a_lock_a_killed_git_left_in_a_bare_room_repository_is_named_and_left(
    tmp_path: Path, project: Path
) -> None:
    bare = tmp_path / "server" / "app.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", str(project), str(bare))
    mirror, _tree, sha = room_with_job_commit(tmp_path / "home2", bare)
    baseline = plain_git(bare, "rev-parse", "main")
    lock = bare / "refs" / "heads" / "main.lock"
    lock.write_text("")  # a push into it SIGKILLed while it moved main

    result = merge_into_base(mirror, sha, "Merge job 9")
    assert not result.merged and result.reason is not None
    assert result.reason.startswith(
        "the room's repository refused to move main. A git that was stopped midway left "
        "refs/heads/main.lock in the repository's git folder"
    )
    assert str(tmp_path) not in result.reason
    assert lock.exists() and plain_git(bare, "rev-parse", "main") == baseline

    lock.unlink()
    assert merge_into_base(mirror, sha, "Merge job 9") == MergeResult(True, sha, None)


def test_in_a_linked_worktree_each_lock_is_named_with_the_folder_it_is_in(
    tmp_path: Path, project: Path
) -> None:
    # The room's repository is a linked worktree with main checked out: its HEAD.lock is
    # in the common git folder's worktrees/<name>/, its branch's lock in the common refs.
    plain_git(project, "checkout", "--quiet", "-b", "elsewhere")
    linked = tmp_path / "linked"
    plain_git(project, "worktree", "add", "--quiet", str(linked), "main")
    mirror, _tree, sha = room_with_job_commit(tmp_path / "home2", linked)
    baseline = plain_git(linked, "rev-parse", "HEAD")
    kill_fast_forward_midway(linked, mirror.path, sha)

    result = merge_into_base(mirror, sha, "Merge job 9")
    assert not result.merged and result.reason is not None
    assert "left worktrees/linked/HEAD.lock, refs/heads/main.lock in the" in result.reason
    assert str(tmp_path) not in result.reason
    common = project / ".git"
    assert (common / "worktrees" / "linked" / "HEAD.lock").exists()
    assert (common / "refs" / "heads" / "main.lock").exists()
    assert plain_git(linked, "rev-parse", "HEAD") == baseline
