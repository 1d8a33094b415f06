"""The hardened git door: plain-words failures, a clean environment, address handling."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.errors import WorkspaceError
from cairn.testing.repos import make_sample_repo
from cairn.workspace.git import (
    GitError,
    check_branch_name,
    git_environment,
    git_folders,
    local_path,
    run_git,
    transport_address,
    try_git,
)


def test_run_git_returns_stdout_without_the_trailing_newline(project: Path) -> None:
    out = run_git("log", "-1", "--format=%s", cwd=project)
    assert out == "Start the greeter project"


def test_a_failure_speaks_plain_words_and_keeps_gits_stderr_aside(project: Path) -> None:
    with pytest.raises(WorkspaceError) as caught:
        run_git("rev-parse", "--verify", "no-such-branch", cwd=project, failure="git found no X")
    error = caught.value
    assert str(error) == "git found no X"
    assert isinstance(error, GitError)
    assert "Needed a single revision" in error.detail
    assert error.returncode == 128


def test_the_default_failure_names_the_step_but_no_path_or_command_line(tmp_path: Path) -> None:
    missing = tmp_path / "secret-place"
    with pytest.raises(GitError) as caught:
        run_git("fetch", "--quiet", "--", str(missing), "main", cwd=tmp_path)
    assert str(caught.value) == "a git 'fetch' step failed"
    assert str(tmp_path) not in str(caught.value)


def test_a_missing_folder_is_reported_without_its_path(tmp_path: Path) -> None:
    with pytest.raises(GitError) as caught:
        run_git("status", cwd=tmp_path / "gone")
    assert "missing" in str(caught.value)
    assert str(tmp_path) not in str(caught.value)


def test_check_false_returns_output_instead_of_raising(project: Path) -> None:
    assert run_git("rev-parse", "--verify", "-q", "nope", cwd=project, check=False) == ""
    assert try_git("rev-parse", "--verify", "-q", "nope", cwd=project).returncode == 1


def test_inherited_repository_variables_cannot_redirect_git(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cairn may itself run inside a git hook, where GIT_DIR names some other repository.
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "other-index"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    environ = git_environment()
    assert "GIT_DIR" not in environ
    assert "GIT_AUTHOR_NAME" not in environ
    assert environ["GIT_OPTIONAL_LOCKS"] == "0"
    assert environ["GIT_TERMINAL_PROMPT"] == "0"
    assert run_git("rev-parse", "--show-toplevel", cwd=project) == str(project.resolve())


@pytest.mark.parametrize(
    ("address", "is_local"),
    [
        ("/srv/repos/app", True),
        ("relative/app", True),
        ("file:///srv/repos/app.git", True),
        ("https://example.com/team/app.git", False),
        ("ssh://git@example.com/team/app.git", False),
        ("git@example.com:team/app.git", False),
    ],
)
def test_local_path_tells_folders_from_remote_addresses(address: str, is_local: bool) -> None:
    path = local_path(address)
    assert (path is not None) == is_local
    if path is not None:
        assert path.is_absolute()
        assert transport_address(address) == str(path)
    else:
        assert transport_address(address) == address


@pytest.mark.parametrize("name", ["main", "cairn/job-7", "release/1.2"])
def test_valid_branch_names_pass(name: str) -> None:
    check_branch_name(name)  # raises on refusal
    assert try_git("check-ref-format", "--branch", name).returncode == 0


@pytest.mark.parametrize("name", ["", "-x", "a..b", "with space", "trailing/", "x.lock"])
def test_invalid_branch_names_are_refused(name: str) -> None:
    with pytest.raises(WorkspaceError, match="not a valid git branch name"):
        check_branch_name(name)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab9_-/.@{}~^: \\*?[", min_size=1, max_size=12))
def test_a_branch_name_is_accepted_only_where_git_accepts_it(name: str) -> None:
    # Plain names are accepted without asking git (one process less per job): never one git
    # would refuse. Every other name is still put to git.
    ours = True
    try:
        check_branch_name(name)
    except WorkspaceError:
        ours = False
    gits = try_git("check-ref-format", f"refs/heads/{name}", cwd="/").returncode == 0
    assert ours == (gits and not name.startswith("-"))


def test_git_folders_names_both_folders_whatever_the_folder_is_called(tmp_path: Path) -> None:
    project = make_sample_repo(tmp_path / "a\nb" / "project")
    common = (project / ".git").resolve()
    assert git_folders(project) == (common, common)
    linked = tmp_path / "linked\nworktree"
    subprocess.run(
        ["git", "worktree", "add", "--quiet", "-b", "other", str(linked)],
        cwd=project, check=True, capture_output=True,
    )  # fmt: skip
    own, shared = git_folders(linked) or (None, None)
    assert shared == common and own is not None and own.parent == common / "worktrees"
    assert git_folders(tmp_path / "missing") is None
    assert git_folders(tmp_path) is None
