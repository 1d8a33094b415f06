"""Which repositories a room may name through the API: remote ones only, never the host's."""

from __future__ import annotations

import pytest

from cairn.errors import UsageError
from cairn.jobs.room_binding import HOST_ONLY, repository

REMOTE = ("https://github.com/a/b.git", "ssh://git@host/x.git", "git@github.com:a/b.git")
HOST = ("/srv/git/app", "../app", "file:///srv/git/app", "FILE:///x", "ext::sh -c id", "x:y")
OPTIONS = ("-oProxyCommand@x:y", "ssh://-oProxyCommand=id/x")


@pytest.mark.parametrize("repo", REMOTE)
def test_a_remote_url_is_taken_as_given(repo: str) -> None:
    assert repository(repo, remote=True) == repo


@pytest.mark.parametrize("repo", HOST + OPTIONS)
def test_anything_else_is_refused_without_echoing_it(repo: str) -> None:
    with pytest.raises(UsageError) as refused:
        repository(repo, remote=True)
    assert str(refused.value) == HOST_ONLY and repo not in str(refused.value)
