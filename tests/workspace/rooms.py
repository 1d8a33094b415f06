"""A room on some repository with one job's commit ready to deliver, for delivery tests."""

from __future__ import annotations

from pathlib import Path

from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree


def room_with_job_commit(home: Path, repository: Path) -> tuple[Mirror, Worktree, str]:
    """The room's mirror of `repository` (by file URL) in `home`, and job 9's worktree with
    its commit adding docs/guide.md on the base branch's tip."""
    mirror = Mirror(home / "room.git", repository.as_uri(), "main")
    baseline = mirror.fetch_baseline()
    tree = Worktree(mirror, home / "job-9", "cairn/job-9")
    tree.ensure(baseline)
    (tree.path / "docs").mkdir(exist_ok=True)
    (tree.path / "docs" / "guide.md").write_text("# Guide\n")
    return mirror, tree, tree.commit(baseline, "Write docs/guide.md")
