"""No repository can run code during cairn's own git operations: no hooks, no fsmonitor."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from cairn.errors import WorkspaceError
from cairn.workspace.delivery import is_merged, merge_into_base, push_branch
from cairn.workspace.mirror import Mirror, checkout_changes
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git

HOOKS = (
    "post-checkout",
    "reference-transaction",
    "pre-commit",
    "post-commit",
    "post-merge",
    "pre-receive",
    "update",
    "post-receive",
    "post-update",
    "push-to-checkout",
    "pre-push",
)


def _plant(git_dir: Path, marker: Path) -> None:
    """Install every hook, a hooks path and an fsmonitor that each leave a mark when run."""
    script = f'#!/bin/sh\necho "$0" >> "{marker}"\n'
    for hooks in (git_dir / "hooks", git_dir / "hostile-hooks"):
        hooks.mkdir(exist_ok=True)
        for name in HOOKS:
            hook = hooks / name
            hook.write_text(script)
            hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    fsmonitor = git_dir / "fsmonitor.sh"
    fsmonitor.write_text(script)
    fsmonitor.chmod(fsmonitor.stat().st_mode | stat.S_IEXEC)
    plain_git(git_dir, "config", "core.fsmonitor", str(fsmonitor))
    plain_git(git_dir, "config", "core.hooksPath", str(git_dir / "hostile-hooks"))


def test_no_hook_or_fsmonitor_runs_during_a_whole_job(
    tmp_path: Path, project: Path, home: Path
) -> None:
    marker = tmp_path / "marker"
    _plant(project / ".git", marker)
    mirror = Mirror(home / "mirrors" / "room.git", str(project), "main")
    baseline = mirror.fetch_baseline()
    # Even if something planted hooks in cairn's own mirror, its worktrees must not run them.
    _plant(mirror.path, marker)

    assert checkout_changes(str(project), "main") == []
    tree = Worktree(mirror, home / "workspaces" / "job-1", "cairn/job-1")
    tree.ensure(baseline)
    (tree.path / "docs").mkdir()
    (tree.path / "docs" / "guide.md").write_text("# Guide\n")
    tree.content_id()
    tree.changed_files(baseline)
    tree.diffstat(baseline)
    sha = tree.commit(baseline, "Add a guide")
    push_branch(mirror, sha, "cairn/job-1")
    assert merge_into_base(mirror, sha, "Merge job 1").merged  # fast-forward in the checkout
    assert is_merged(mirror, sha)

    second = Worktree(mirror, home / "workspaces" / "job-2", "cairn/job-2")
    second.ensure(baseline)
    (second.path / "NOTES.md").write_text("notes\n")
    other = second.commit(baseline, "Add notes")
    assert merge_into_base(mirror, other, "Merge job 2").merged  # a real merge commit
    second.remove()

    assert plain_git(project, "rev-parse", "HEAD^2") == other
    assert not marker.exists(), marker.read_text()

    # The control: the same repository's hooks do run under plain git.
    identity = ("-c", "user.name=P", "-c", "user.email=p@x")
    plain_git(project, *identity, "commit", "--allow-empty", "--quiet", "-m", "By a person")
    ran = marker.read_text()
    assert "hostile-hooks/post-commit" in ran
    assert "fsmonitor.sh" in ran


def test_no_hook_runs_when_delivering_into_a_local_bare_repository(
    tmp_path: Path, project: Path, home: Path
) -> None:
    marker = tmp_path / "marker"
    server = tmp_path / "server.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", str(project), str(server))
    _plant(server, marker)
    mirror = Mirror(home / "mirrors" / "room.git", str(server), "main")
    baseline = mirror.fetch_baseline()
    tree = Worktree(mirror, home / "workspaces" / "job-1", "cairn/job-1")
    tree.ensure(baseline)
    (tree.path / "NOTES.md").write_text("notes\n")
    sha = tree.commit(baseline, "Add notes")
    push_branch(mirror, sha, "cairn/job-1")
    assert merge_into_base(mirror, sha, "Merge job 1").merged
    assert plain_git(server, "rev-parse", "main", "cairn/job-1") == f"{sha}\n{sha}"
    assert not marker.exists(), marker.read_text()

    # The control: a plain push into the same repository runs its receive hooks.
    plain_git(project, "push", "--quiet", str(server), "main:refs/heads/person")
    assert "pre-receive" in marker.read_text()


def test_an_ext_url_cannot_run_a_command_even_if_global_config_allows_it(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "marker"
    permissive = tmp_path / "global.gitconfig"
    permissive.write_text('[protocol "ext"]\n\tallow = always\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(permissive))
    mirror = Mirror(home / "mirrors" / "room.git", f"ext::sh -c touch% {marker}", "main")
    with pytest.raises(WorkspaceError):
        mirror.fetch_baseline()
    assert not marker.exists()


def test_a_repository_address_cannot_smuggle_an_option(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "marker"
    mirror = Mirror(home / "mirrors" / "room.git", f"--upload-pack=touch {marker};", "main")
    with pytest.raises(WorkspaceError):
        mirror.fetch_baseline()
    assert not marker.exists()
