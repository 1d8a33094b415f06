"""Removing an ended job's workspace: the folder goes, read-only parts too; the branch stays.

`Worktree.remove` is the one way to do it; `cairn gc` calls it for every ended job.
"""

from __future__ import annotations

import os
from pathlib import Path

from cairn.deps.tree import make_read_only
from cairn.jobs.gc import prune_mirror
from cairn.workspace.commands import DEPENDENCY_MARKER
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git


def _worktrees(worktree: Worktree) -> str:
    return plain_git(worktree.mirror.path, "worktree", "list", "--porcelain")


def test_an_ended_workspace_is_removed_with_its_dependencies_and_its_branch_kept(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "a.txt").write_text("the job's work\n")
    worktree.commit(baseline, "the job's commit")
    venv = worktree.path / ".venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "pkg.py").write_text("x = 1\n")
    (venv / DEPENDENCY_MARKER).write_text("fingerprint\n")
    make_read_only(venv)  # as a materialized layout is (git alone cannot delete it, unless root)
    head = worktree.head()

    assert worktree.remove() is True

    assert not worktree.path.exists()
    assert str(worktree.path) not in _worktrees(worktree)
    assert plain_git(worktree.mirror.path, "rev-parse", worktree.branch_ref) == head
    assert worktree.remove() is False, "nothing left to remove"


def test_a_workspace_whose_git_pointer_was_rewritten_is_still_removed(
    worktree: Worktree, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (worktree.path / ".git").write_text(f"gitdir: {elsewhere}\n")

    assert worktree.remove() is True

    assert not worktree.path.exists()
    assert elsewhere.is_dir(), "nothing outside the workspace was touched"
    prune_mirror(worktree.mirror)
    assert str(worktree.path) not in _worktrees(worktree)


def test_pruning_a_mirror_keeps_a_live_workspace_working(worktree: Worktree, baseline: str) -> None:
    (worktree.path / "b.txt").write_text("in progress\n")
    before = worktree.content_id()

    prune_mirror(worktree.mirror)

    assert worktree.is_valid() and worktree.content_id() == before
    assert os.path.isdir(worktree.path)


def test_remove_deletes_the_folder_but_keeps_the_branch(
    worktree: Worktree, mirror: Mirror, baseline: str
) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    sha = worktree.commit(baseline, "Add NEW.md")
    assert worktree.remove() is True
    assert worktree.remove() is False  # idempotent
    assert not worktree.path.exists()
    assert plain_git(mirror.path, "rev-parse", "refs/heads/cairn/job-1") == sha
    assert "job-1" not in plain_git(mirror.path, "worktree", "list")
