"""`room create` against a repository that never answers: a spinner, a timeout, one clear line.

The repository is a server on 127.0.0.1 that accepts and never answers (no traffic leaves
this machine); CAIRN_GIT_TIMEOUT is 1 s so the test does not wait for the default.
"""

from __future__ import annotations

import os
import pty
import subprocess

import pytest

from cairn.testing.silent_server import silent_server

from .conftest import CAIRN, CALL_TIMEOUT, Cli

pytestmark = pytest.mark.acceptance

GAVE_UP = (
    "error: git got no answer from the room's repository for 1 s and was stopped; "
    "check the URL and the network, or raise CAIRN_GIT_TIMEOUT"
)


def test_room_create_gives_up_on_a_silent_repository_and_creates_nothing(cli: Cli) -> None:
    with silent_server() as server:
        address = f"http://127.0.0.1:{server.port}/x.git"
        done = cli(
            "room", "create", "r", "--repo", address, expect=None, env={"CAIRN_GIT_TIMEOUT": "1"}
        )
        assert server.accepted >= 1
        assert server.all_hung_up(within=10), "git's helper process was left running"
    assert done.returncode == 2, "the repository named on the command line is bad input"
    assert done.stderr.strip() == GAVE_UP
    assert done.stdout == ""
    assert cli.json("room", "list") == []


def test_room_create_shows_a_spinner_only_on_a_terminal(cli: Cli) -> None:
    with silent_server() as server:
        address = f"http://127.0.0.1:{server.port}/x.git"
        try:
            leader, follower = pty.openpty()
        except OSError:  # a chroot without devpts, say: nothing to show a spinner on
            pytest.skip("this machine gives out no pseudo-terminals")
        try:
            done = subprocess.run(
                [str(CAIRN), "room", "create", "r", "--repo", address],
                env=cli.env | {"CAIRN_GIT_TIMEOUT": "1", "TERM": "xterm"},
                cwd=cli.tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=follower,
                timeout=CALL_TIMEOUT,
                check=False,
            )
        finally:
            os.close(follower)
        shown = _read_all(leader)
    assert done.returncode == 2
    assert "reaching the repository" in shown
    assert GAVE_UP in shown
    cli.assert_private(shown)


def test_an_unusable_git_timeout_is_a_usage_error(cli: Cli) -> None:
    for value in ("soon", "0", "-5", "inf"):
        done = cli("room", "list", expect=2, env={"CAIRN_GIT_TIMEOUT": value})
        assert done.stderr.strip() == (
            "error: CAIRN_GIT_TIMEOUT must be a number of seconds greater than zero, for example 60"
        )


def _read_all(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        pass  # the terminal's other end is closed: everything has been read
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")
