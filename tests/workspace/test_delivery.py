"""Delivery effects: pushing the job's branch and merging it into the base branch."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.repos import commit_file
from cairn.workspace import delivery
from cairn.workspace.delivery import (
    BranchTaken,
    MergeResult,
    _advance_base,
    is_merged,
    merge_into_base,
    push_branch,
    remote_branch_sha,
)
from cairn.workspace.git import GitError
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git
from .rooms import room_with_job_commit


def _job_commit(worktree: Worktree, baseline: str, relpath: str, content: str) -> str:
    target = worktree.path / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return worktree.commit(baseline, f"Write {relpath}")


@pytest.fixture
def job_sha(worktree: Worktree, baseline: str) -> str:
    """Job 1's commit: a new file docs/guide.md on top of the baseline."""
    return _job_commit(worktree, baseline, "docs/guide.md", "# Guide\n")


@pytest.fixture
def server(tmp_path: Path, project: Path) -> Path:
    """A bare repository standing in for a hosted remote, cloned from `project`."""
    bare = tmp_path / "server" / "app.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", str(project), str(bare))
    return bare


# --- push_branch and remote_branch_sha -------------------------------------------------------


def test_push_branch_publishes_the_sha_and_is_idempotent(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    assert remote_branch_sha(str(project), "cairn/job-1") is None
    push_branch(mirror, job_sha, "cairn/job-1")
    push_branch(mirror, job_sha, "cairn/job-1")
    assert remote_branch_sha(str(project), "cairn/job-1") == job_sha
    assert plain_git(project, "rev-parse", "refs/heads/cairn/job-1") == job_sha
    assert plain_git(project, "symbolic-ref", "HEAD") == "refs/heads/main"


def test_push_branch_refuses_to_overwrite_a_different_sha(
    mirror: Mirror, project: Path, job_sha: str, baseline: str
) -> None:
    plain_git(project, "branch", "cairn/job-1", baseline)
    with pytest.raises(BranchTaken, match="already exists") as caught:
        push_branch(mirror, job_sha, "cairn/job-1")
    assert str(project) not in str(caught.value)
    assert plain_git(project, "rev-parse", "refs/heads/cairn/job-1") == baseline


@pytest.mark.parametrize("remote", [False, True], ids=["local", "url"])
def test_push_branch_never_moves_a_branch_that_appeared_meanwhile(
    tmp_path: Path,
    server: Path,
    mirror: Mirror,
    project: Path,
    job_sha: str,
    baseline: str,
    monkeypatch: pytest.MonkeyPatch,
    remote: bool,
) -> None:
    if remote:
        mirror, _tree, job_sha = room_with_job_commit(tmp_path / "home2", server)
    repo = server if remote else project
    plain_git(repo, "branch", "cairn/job-1", baseline)  # an ancestor: a fetch would move it
    real, looks = delivery.remote_branch_sha, []

    def first_look_misses(*args: str, **settings: Any) -> str | None:
        looks.append(args)
        return None if len(looks) == 1 else real(*args, **settings)

    monkeypatch.setattr(delivery, "remote_branch_sha", first_look_misses)
    with pytest.raises(BranchTaken, match="neither adopts nor overwrites"):
        push_branch(mirror, job_sha, "cairn/job-1")
    assert plain_git(repo, "rev-parse", "refs/heads/cairn/job-1") == baseline
    assert plain_git(repo, "for-each-ref", "refs/cairn/") == ""


def test_push_branch_to_a_remote_url(tmp_path: Path, server: Path) -> None:
    mirror, _tree, sha = room_with_job_commit(tmp_path / "home2", server)
    push_branch(mirror, sha, "cairn/job-9")
    assert remote_branch_sha(server.as_uri(), "cairn/job-9") == sha
    assert remote_branch_sha(server.as_uri(), "job-9") is None  # tail matches do not count


# --- merge_into_base into a person's checkout ------------------------------------------------


def test_fast_forward_into_a_clean_checked_out_base_updates_the_working_tree(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert result == MergeResult(True, job_sha, None)
    assert plain_git(project, "rev-parse", "HEAD") == job_sha
    assert (project / "docs" / "guide.md").read_text() == "# Guide\n"
    assert plain_git(project, "status", "--porcelain") == ""
    assert plain_git(project, "for-each-ref", "refs/cairn/") == ""  # hidden ref cleaned up
    assert is_merged(mirror, job_sha)


def test_a_clean_non_fast_forward_merge_creates_a_merge_commit(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    theirs = commit_file(project, "CHANGELOG.md", "- meanwhile\n", "Meanwhile on main")
    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert result.merged
    assert result.commit is not None
    assert plain_git(project, "rev-parse", "HEAD") == result.commit
    assert plain_git(project, "rev-parse", f"{result.commit}^1", f"{result.commit}^2") == (
        f"{theirs}\n{job_sha}"
    )
    assert plain_git(project, "log", "-1", "--format=%an|%s", result.commit) == "cairn|Merge job 1"
    assert (project / "docs" / "guide.md").is_file()
    assert (project / "CHANGELOG.md").is_file()
    assert plain_git(project, "status", "--porcelain") == ""


def test_a_conflict_is_left_to_a_person_and_base_is_untouched(
    mirror: Mirror, project: Path, worktree: Worktree, baseline: str
) -> None:
    sha = _job_commit(worktree, baseline, "README.md", "# ours\n")
    theirs = commit_file(project, "README.md", "# theirs\n", "Edit the README on main")
    result = merge_into_base(mirror, sha, "Merge job 1")
    assert not result.merged
    assert result.commit is None
    assert result.reason is not None
    assert "conflicts with newer changes on main" in result.reason
    assert plain_git(project, "rev-parse", "main") == theirs
    assert (project / "README.md").read_text() == "# theirs\n"
    assert not is_merged(mirror, sha)


def test_a_checked_out_base_with_local_changes_is_left_byte_identical(
    mirror: Mirror, project: Path, job_sha: str, baseline: str
) -> None:
    (project / "src" / "app.py").write_bytes(b"# half-done local work\n")
    plain_git(project, "add", "src/app.py")
    (project / "README.md").write_bytes(b"unstaged edit\r\n")
    (project / "scratch.txt").write_bytes(b"\x00untracked\xff")
    index = project / ".git" / "index"
    before = {p: p.read_bytes() for p in (index, project / "README.md", project / "scratch.txt")}
    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert not result.merged
    assert result.reason is not None
    assert "checked out with local changes" in result.reason
    assert {p: p.read_bytes() for p in before} == before
    assert (project / "src" / "app.py").read_bytes() == b"# half-done local work\n"
    assert plain_git(project, "rev-parse", "main") == baseline
    assert not (project / "docs").exists()
    assert plain_git(project, "stash", "list") == ""


def test_a_base_checked_out_in_another_worktree_is_left_to_a_person(
    tmp_path: Path, mirror: Mirror, project: Path, job_sha: str, baseline: str
) -> None:
    plain_git(project, "switch", "--quiet", "-c", "side")
    plain_git(project, "worktree", "add", "--quiet", str(tmp_path / "elsewhere"), "main")
    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert result == MergeResult(
        False, None, "main is checked out in another worktree of the room's repository"
    )
    assert plain_git(project, "rev-parse", "main") == baseline


def test_merging_twice_merges_once(mirror: Mirror, project: Path, job_sha: str) -> None:
    commit_file(project, "CHANGELOG.md", "- meanwhile\n", "Meanwhile on main")
    first = merge_into_base(mirror, job_sha, "Merge job 1")
    count = plain_git(project, "rev-list", "--count", "main")
    reflog = plain_git(project, "reflog", "show", "--format=%H", "refs/heads/main")
    second = merge_into_base(mirror, job_sha, "Merge job 1")
    assert second == first
    assert plain_git(project, "rev-list", "--count", "main") == count
    assert plain_git(project, "reflog", "show", "--format=%H", "refs/heads/main") == reflog
    assert len(reflog.splitlines()) == 3  # initial commit, CHANGELOG commit, one merge


# --- merge_into_base into repositories where nobody has the base checked out -----------------


def test_merge_into_a_bare_remote_pushes_without_force(tmp_path: Path, server: Path) -> None:
    mirror, _tree, sha = room_with_job_commit(tmp_path / "home2", server)
    assert merge_into_base(mirror, sha, "Merge job 9") == MergeResult(True, sha, None)
    assert plain_git(server, "rev-parse", "main") == sha
    assert merge_into_base(mirror, sha, "Merge job 9") == MergeResult(True, sha, None)


def test_merge_into_a_local_checkout_on_another_branch(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    plain_git(project, "switch", "--quiet", "-c", "feature")
    (project / "wip.txt").write_text("a person's work on another branch\n")
    result = merge_into_base(mirror, job_sha, "Merge job 1")
    assert result == MergeResult(True, job_sha, None)
    assert plain_git(project, "rev-parse", "main") == job_sha
    assert plain_git(project, "symbolic-ref", "HEAD") == "refs/heads/feature"
    assert (project / "wip.txt").is_file()
    assert not (project / "docs").exists()


def test_a_clean_non_fast_forward_merge_into_a_bare_remote(tmp_path: Path, server: Path) -> None:
    mirror, _tree, sha = room_with_job_commit(tmp_path / "home2", server)
    elsewhere = tmp_path / "colleague"
    plain_git(tmp_path, "clone", "--quiet", str(server), str(elsewhere))
    theirs = commit_file(elsewhere, "CHANGELOG.md", "- meanwhile\n", "Meanwhile")
    plain_git(elsewhere, "push", "--quiet", "origin", "main")
    result = merge_into_base(mirror, sha, "Merge job 9")
    assert result.merged
    assert plain_git(server, "rev-parse", "main") == result.commit
    assert plain_git(server, "rev-parse", f"{result.commit}^1") == theirs


# --- the base moving between cairn's fetch and its update ------------------------------------


def test_a_base_that_moved_meanwhile_is_not_overwritten_in_a_bare_remote(
    tmp_path: Path, server: Path
) -> None:
    mirror, _tree, sha = room_with_job_commit(tmp_path / "home2", server)
    stale_tip = plain_git(server, "rev-parse", "main")
    elsewhere = tmp_path / "colleague"
    plain_git(tmp_path, "clone", "--quiet", str(server), str(elsewhere))
    theirs = commit_file(elsewhere, "CHANGELOG.md", "- meanwhile\n", "Meanwhile")
    plain_git(elsewhere, "push", "--quiet", "origin", "main")
    assert _advance_base(mirror, stale_tip, sha) is None  # "recompute", not "overwrite"
    assert plain_git(server, "rev-parse", "main") == theirs


def test_a_checkout_that_moved_meanwhile_is_not_touched(
    mirror: Mirror, project: Path, job_sha: str, baseline: str
) -> None:
    theirs = commit_file(project, "CHANGELOG.md", "- meanwhile\n", "Meanwhile")
    assert _advance_base(mirror, baseline, job_sha) is None
    assert plain_git(project, "rev-parse", "main") == theirs
    assert plain_git(project, "for-each-ref", "refs/cairn/") == ""


def test_a_delivery_killed_while_its_hidden_ref_was_locked_is_retried(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    # The runner died with its git while the commit's hidden ref was locked; the retry of
    # both deliveries (the push, the merge into the checked-out base) uses that same ref.
    a_minute_ago = time.time() - 60
    left = [
        project / ".git" / "refs" / "cairn" / kind / f"{job_sha}.lock" for kind in ("push", "merge")
    ]
    for lock in left:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("left by a killed git\n")
        os.utime(lock, (a_minute_ago, a_minute_ago))
    push_branch(mirror, job_sha, "cairn/job-1")
    assert merge_into_base(mirror, job_sha, "Merge job 1").merged
    assert plain_git(project, "rev-parse", "cairn/job-1", "main") == f"{job_sha}\n{job_sha}"
    assert not any(lock.exists() for lock in left)
    assert plain_git(project, "for-each-ref", "refs/cairn/") == ""


def test_a_push_killed_while_the_jobs_branch_was_locked_is_retried(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    # The runner died inside the `update-ref` that creates the job's branch in the room's
    # repository: its lock is left, the branch is not. The job's branch is cairn's own, so
    # the retry clears a lock that old; a lock on any other branch stays where it is.
    a_minute_ago = time.time() - 60
    heads = project / ".git" / "refs" / "heads"
    left, theirs = heads / "cairn" / "job-1.lock", heads / "feature.lock"
    for lock in (left, theirs):
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(f"{job_sha}\n")
        os.utime(lock, (a_minute_ago, a_minute_ago))
    push_branch(mirror, job_sha, "cairn/job-1")
    assert plain_git(project, "rev-parse", "cairn/job-1") == job_sha
    assert not left.exists()
    assert theirs.read_text() == f"{job_sha}\n"


@pytest.mark.parametrize("layout", ["linked worktree", "separate git folder"])
def test_a_killed_push_is_retried_where_the_git_folder_is_not_inside_the_checkout(
    tmp_path: Path, project: Path, layout: str
) -> None:
    # The room's checkout has a `.git` file: the job branch's lock is in another folder.
    if layout == "linked worktree":
        plain_git(project, "checkout", "--quiet", "-b", "elsewhere")
        room = tmp_path / "linked"
        plain_git(project, "worktree", "add", "--quiet", str(room), "main")
        refs = project / ".git" / "refs"
    else:
        room, refs = project, tmp_path / "elsewhere.git" / "refs"
        plain_git(project, "init", "--quiet", f"--separate-git-dir={refs.parent}")
    mirror, tree, sha = room_with_job_commit(tmp_path / "home2", room)
    assert tree.branch == "cairn/job-9"
    left = refs / "heads" / "cairn" / "job-9.lock"
    left.parent.mkdir(parents=True, exist_ok=True)
    left.write_text("left by a killed git\n")
    a_minute_ago = time.time() - 60
    os.utime(left, (a_minute_ago, a_minute_ago))
    push_branch(mirror, sha, "cairn/job-9")
    assert plain_git(room, "rev-parse", "cairn/job-9") == sha
    assert not left.exists()


def test_a_push_blocked_by_a_persons_branch_named_like_its_folder_fails_in_plain_words(
    mirror: Mirror, project: Path, job_sha: str
) -> None:
    # `refs/heads/cairn` is a file (a person's branch `cairn`): git cannot create
    # `cairn/job-1` beside it, and no lock can be there either.
    plain_git(project, "branch", "cairn")
    with pytest.raises(GitError, match="could not push branch cairn/job-1"):
        push_branch(mirror, job_sha, "cairn/job-1")
    assert plain_git(project, "for-each-ref", "refs/cairn/") == ""
    assert plain_git(project, "rev-parse", "cairn") == plain_git(project, "rev-parse", "main")
