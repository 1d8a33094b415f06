"""Workspaces: the room's mirror, each job's worktree, delivery, and the path boundary.

All git work goes through `cairn.workspace.git.run_git`, which hardens every call so no
repository can run code (hooks, fsmonitor) during cairn's own operations.
"""

from __future__ import annotations

from cairn.workspace.boundary import resolve_inside
from cairn.workspace.commands import DEFAULT_POLICY, CommandResult, SandboxPolicy, run_in_workspace
from cairn.workspace.delivery import (
    MergeResult,
    is_merged,
    merge_into_base,
    push_branch,
    remote_branch_sha,
)
from cairn.workspace.egress import Egress
from cairn.workspace.git import GitError, run_git
from cairn.workspace.mirror import Mirror, checked_out_base, checkout_changes
from cairn.workspace.worktree import Worktree

__all__ = [
    "DEFAULT_POLICY",
    "CommandResult",
    "Egress",
    "GitError",
    "MergeResult",
    "Mirror",
    "SandboxPolicy",
    "Worktree",
    "checked_out_base",
    "checkout_changes",
    "is_merged",
    "merge_into_base",
    "push_branch",
    "remote_branch_sha",
    "resolve_inside",
    "run_git",
    "run_in_workspace",
]
