"""Git calls that reach a repository stop once it stays silent, taking their processes along.

Every address here is a server on 127.0.0.1 that accepts and never answers: no test traffic
leaves this machine.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.testing.silent_server import SilentServer, silent_server
from cairn.workspace.delivery import remote_branch_sha
from cairn.workspace.git import GitError, GitTimeout, run_git, try_git
from cairn.workspace.mirror import Mirror

TIMEOUT = 1.0
HANG_UP_WAIT = 10.0


@pytest.fixture
def server() -> Iterator[SilentServer]:
    with silent_server() as found:
        yield found


def _addresses(port: int) -> list[str]:
    found = [f"http://127.0.0.1:{port}/x.git"]
    if shutil.which("ssh"):
        found += [f"ssh://git@127.0.0.1:{port}/x.git"]
    return found


def test_a_silent_repository_stops_ls_remote_and_every_process_under_git(
    server: SilentServer,
) -> None:
    for address in _addresses(server.port):
        with pytest.raises(GitTimeout) as caught:
            remote_branch_sha(address, "main", timeout=TIMEOUT)
        assert str(caught.value) == (
            "git got no answer from the room's repository for 1 s and was stopped; "
            "check the URL and the network, or raise CAIRN_GIT_TIMEOUT"
        )
    assert server.accepted >= len(_addresses(server.port)), "git did reach the server"
    # git's helpers (git-remote-http, ssh) hold the connections: they went with git.
    assert server.all_hung_up(within=HANG_UP_WAIT)


def test_a_silent_repository_stops_the_mirror_clone_with_the_timeout_error(
    server: SilentServer, tmp_path: Path
) -> None:
    mirror = Mirror(
        tmp_path / "room.git", f"http://127.0.0.1:{server.port}/x.git", "main", git_timeout=1
    )
    with pytest.raises(GitTimeout, match="raise CAIRN_GIT_TIMEOUT"):
        mirror.fetch_baseline()
    assert not mirror.exists()
    assert server.all_hung_up(within=HANG_UP_WAIT)


def test_a_silent_repository_stops_the_baseline_fetch(
    server: SilentServer, mirror: Mirror, baseline: str
) -> None:
    silent = Mirror(
        mirror.path, f"http://127.0.0.1:{server.port}/x.git", "main", git_timeout=TIMEOUT
    )
    with pytest.raises(GitTimeout):
        silent.fetch_baseline()
    assert silent.git("rev-parse", silent.base_ref) == baseline, "the mirror is unchanged"


def test_a_silent_repository_stops_a_push(
    server: SilentServer, mirror: Mirror, baseline: str
) -> None:
    address = f"http://127.0.0.1:{server.port}/x.git"
    with pytest.raises(GitTimeout):
        mirror.git("push", "--quiet", "--", address, f"{baseline}:refs/heads/x", timeout=TIMEOUT)
    assert server.all_hung_up(within=HANG_UP_WAIT)


def test_a_watched_call_that_answers_returns_what_git_said(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.git"
    cloned = try_git(
        "clone", "--bare", "--quiet", "--no-local", "--", str(project), str(copy), timeout=30
    )
    # A watched call asks git for progress; none of it reaches what the caller reads.
    assert (cloned.returncode, cloned.stdout, cloned.stderr) == (0, "", "")
    heads = run_git("ls-remote", "--heads", "--", str(copy), timeout=30)
    assert heads.endswith("\trefs/heads/main")
    with pytest.raises(GitError) as caught:
        run_git("fetch", "--quiet", "--", str(copy), "no-such-branch", cwd=copy, timeout=30)
    assert not isinstance(caught.value, GitTimeout)
    assert "couldn't find remote ref" in caught.value.detail


def test_a_missing_branch_is_still_named_when_the_fetch_is_watched(
    project: Path, tmp_path: Path
) -> None:
    mirror = Mirror(tmp_path / "room.git", str(project), "develop", git_timeout=30)
    with pytest.raises(GitError, match="'develop' does not exist"):
        mirror.fetch_baseline()
