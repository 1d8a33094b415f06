"""A CLI turn's network plan: the egress proxy for the turn, its sockets in a private folder
that is gone once the turn is over."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cairn.agents import cli_process
from cairn.agents.cli_process import network_plan
from cairn.errors import UsageError
from cairn.workspace import commands

needs_sandbox = pytest.mark.skipif(
    commands.sandbox_problem() is not None, reason="needs bubblewrap"
)


@needs_sandbox
def test_a_turn_gets_its_own_network_and_its_socket_folder_only_while_it_runs() -> None:
    with tempfile.TemporaryDirectory(prefix="cairn-") as short:  # pytest's are too deep
        folder = Path(short) / "job-1.egress"
        with network_plan("http://localhost:8000/v1", folder) as plan:
            assert not plan.share_host and "--unshare-net" in plan.bwrap_args
            assert plan.endpoint == "http://127.0.0.1:8000/v1", "loopback, by address"
            assert plan.environment["HTTPS_PROXY"].startswith("http://127.0.0.1:")
            assert folder.stat().st_mode & 0o077 == 0, "cairn's own"
            assert str(folder) in plan.bwrap_args
        assert not folder.exists()


@needs_sandbox
def test_a_folder_too_deep_for_a_socket_path_gives_way_to_a_temporary_one(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 80) / "job-1.egress"
    with network_plan("https://api.openai.com/v1", deep) as plan:
        folder = Path(plan.bwrap_args[plan.bwrap_args.index("--ro-bind") + 1])
        assert folder.name.startswith("cairn-egress-") and folder.is_dir()
        assert plan.endpoint == "https://api.openai.com/v1", "through the proxy, unchanged"
    assert not folder.exists() and not deep.exists()


@needs_sandbox
def test_an_endpoint_that_is_no_url_is_a_clear_error(tmp_path: Path) -> None:
    refused = pytest.raises(UsageError, match="not an http:// or https:// URL")
    with refused, network_plan("ftp://example.com", tmp_path / "e"):
        pass


def test_without_a_sandbox_the_host_network_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_process.commands, "sandbox_problem", lambda: "no bubblewrap")
    with network_plan("http://127.0.0.1:9/", tmp_path) as plan:
        assert plan.share_host and plan.bwrap_args == () and plan.endpoint == "http://127.0.0.1:9/"
