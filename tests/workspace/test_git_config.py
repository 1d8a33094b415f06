"""Which config files git reads in a folder, and the driver settings read once per their state."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.workspace import git, git_config
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git


@pytest.fixture
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "user.gitconfig"
    config.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return config


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Config files count as settled at once (they were all written a moment ago)."""
    monkeypatch.setattr(git_config, "SETTLE_SECONDS", 0.0)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The folders cairn asked git for driver settings in, from an empty memory of them."""
    asked: list[str] = []
    read: Callable[..., dict[str, str] | None] = git._read_overrides

    def counting(cwd: Path | str, environ: dict[str, str]) -> dict[str, str] | None:
        asked.append(str(cwd))
        return read(cwd, environ)

    monkeypatch.setattr(git, "_read_overrides", counting)
    monkeypatch.setattr(git, "_known_overrides", {})
    yield asked


def _environ() -> dict[str, str]:
    return git.git_environment()


def test_a_worktree_reads_the_mirrors_config_its_own_and_the_users(
    worktree: Worktree, mirror: Mirror, user_config: Path
) -> None:
    admin = Path(plain_git(worktree.path, "rev-parse", "--path-format=absolute", "--git-dir"))
    files = git_config.config_files(worktree.path, _environ())
    assert files is not None
    assert [Path(f).resolve() for f in files] == [
        (mirror.path / "config").resolve(),
        (admin / "config.worktree").resolve(),
        user_config.resolve(),
    ]
    assert git_config.config_files(mirror.path, _environ()) == [
        str(mirror.path / "config"),
        str(mirror.path / "config.worktree"),
        str(user_config),
    ]


def test_a_folder_that_is_not_the_top_of_a_repository_has_no_signature(
    worktree: Worktree, tmp_path: Path, user_config: Path, settled: None
) -> None:
    assert git_config.signature(worktree.path / "src", _environ()) is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_config.signature(plain, _environ()) is None
    assert git_config.signature(worktree.path, _environ()) is not None


def test_any_change_to_a_config_file_changes_the_signature(
    worktree: Worktree, mirror: Mirror, user_config: Path, settled: None
) -> None:
    before = git_config.signature(worktree.path, _environ())
    assert before == git_config.signature(worktree.path, _environ())
    plain_git(mirror.path, "config", "--file", str(user_config), "user.name", "someone")
    after_user = git_config.signature(worktree.path, _environ())
    assert after_user != before
    plain_git(mirror.path, "config", "core.bigFileThreshold", "1m")
    assert git_config.signature(worktree.path, _environ()) not in (before, after_user)


def test_a_config_file_written_a_moment_ago_has_no_signature(
    worktree: Worktree, user_config: Path
) -> None:
    user_config.write_text("[user]\n\tname = someone\n")
    assert git_config.signature(worktree.path, _environ()) is None
    old = 1_000_000_000
    os.utime(user_config, (old, old))  # an old mtime does not hide the fresh ctime
    assert git_config.signature(worktree.path, _environ()) is None


def test_settings_given_in_the_environment_are_part_of_the_signature(
    worktree: Worktree, user_config: Path, settled: None
) -> None:
    plain = git_config.signature(worktree.path, _environ())
    given = {**_environ(), "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "a.b"}
    assert git_config.signature(worktree.path, given) != plain


def test_a_config_that_includes_another_file_is_never_kept(
    worktree: Worktree, tmp_path: Path, user_config: Path, settled: None, reads: list[str]
) -> None:
    included = tmp_path / "included.gitconfig"
    included.write_text("")
    user_config.write_text(f"[Include]\n\tpath = {included}\n")
    signed = git_config.signature(worktree.path, _environ())
    assert signed is not None and git_config.includes_other_files(signed)
    worktree.content_id()
    worktree.content_id()
    assert len(reads) == 6  # read-tree, add and write-tree each asked, twice


def test_driver_settings_are_read_once_while_no_config_file_changes(
    worktree: Worktree, mirror: Mirror, user_config: Path, settled: None, reads: list[str]
) -> None:
    worktree.content_id()
    worktree.content_id()
    second = Worktree(mirror, worktree.path.with_name("job-2"), "cairn/job-2")
    second.ensure(worktree.head())
    second.content_id()
    assert len(reads) == 1  # every worktree of the mirror reads the same files
    plain_git(mirror.path, "config", "--file", str(user_config), "user.name", "someone")
    worktree.content_id()
    assert len(reads) == 2


def test_the_system_file_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {"GIT_CONFIG_NOSYSTEM": "1"}
    assert git_config._system_file(environ) == ""
    assert git_config._system_file({"GIT_CONFIG_SYSTEM": "/etc/other"}) == "/etc/other"
    assert git_config._system_file({"GIT_CONFIG_NOSYSTEM": "maybe"}) is None
    # Not named in the environment: the file this host's git was built to read, as git says.
    built_in = git_config._built_in_system_file()
    assert built_in is None or Path(built_in).is_absolute()
    assert git_config._system_file({"GIT_CONFIG_NOSYSTEM": "0"}) == built_in
