"""Fixtures for the workspace tests: a person's repository, the room's mirror, a job worktree.

Everything runs real git in `tmp_path`. Assertions read repositories with plain `git`
(see `plain_git`), not with cairn's hardened wrapper, so they observe what a person would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.testing.repos import make_sample_repo
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A person's non-bare repository with `main` checked out and a clean working tree."""
    return make_sample_repo(tmp_path / "project")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """cairn's home folder."""
    return tmp_path / "cairn-home"


@pytest.fixture
def mirror(home: Path, project: Path) -> Mirror:
    """The room's mirror of `project`, not yet cloned."""
    return Mirror(home / "mirrors" / "room-1.git", str(project), "main")


@pytest.fixture
def baseline(mirror: Mirror) -> str:
    """The baseline revision: the freshly fetched tip of `main`."""
    return mirror.fetch_baseline()


@pytest.fixture
def worktree(home: Path, mirror: Mirror, baseline: str) -> Worktree:
    """Job 1's worktree, created at the baseline."""
    tree = Worktree(mirror, home / "workspaces" / "job-1", "cairn/job-1")
    tree.ensure(baseline)
    return tree
