"""The sample repository shipped in `cairn.testing` for the demo and the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cairn.testing.repos import commit_file, make_sample_repo

from .gitcli import plain_git


def test_the_sample_repo_has_one_commit_and_a_clean_tree(tmp_path: Path) -> None:
    repo = make_sample_repo(tmp_path / "sample")
    assert plain_git(repo, "rev-list", "--count", "HEAD") == "1"
    assert plain_git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert plain_git(repo, "status", "--porcelain") == ""
    files = plain_git(repo, "ls-files").splitlines()
    assert {"README.md", ".gitignore", "src/app.py", "tests/test_app.py"} <= set(files)


def test_the_sample_repo_is_the_same_every_time(tmp_path: Path) -> None:
    first = make_sample_repo(tmp_path / "one", branch="trunk")
    second = make_sample_repo(tmp_path / "two", branch="trunk")
    assert plain_git(first, "rev-parse", "trunk") == plain_git(second, "rev-parse", "trunk")


def test_the_sample_repos_own_tests_pass(tmp_path: Path) -> None:
    repo = make_sample_repo(tmp_path / "sample")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_commit_file_commits_only_that_file(tmp_path: Path) -> None:
    repo = make_sample_repo(tmp_path / "sample")
    (repo / "untracked.txt").write_text("left alone\n")
    sha = commit_file(repo, "docs/notes.md", b"bytes\n", "Add notes")
    assert plain_git(repo, "rev-parse", "HEAD") == sha
    assert plain_git(repo, "show", "--name-only", "--format=", sha) == "docs/notes.md"
    assert plain_git(repo, "status", "--porcelain") == "?? untracked.txt"
