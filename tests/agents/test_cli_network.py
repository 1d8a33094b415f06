"""A CLI turn's network plan: the egress proxy for the turn, its sockets in a private folder
that is gone once the turn is over."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cairn.agents import cli_process
from cairn.agents.cli_process import endpoint_inside, network_plan
from cairn.errors import UsageError
from cairn.workspace import commands


def test_the_endpoint_inside_is_loopback_by_address_and_any_other_url_unchanged() -> None:
    assert endpoint_inside("http://localhost:8000/v1") == "http://127.0.0.1:8000/v1"
    assert endpoint_inside("http://127.0.0.1:9/") == "http://127.0.0.1:9/"
    assert endpoint_inside("https://api.openai.com/v1") == "https://api.openai.com/v1"
    with pytest.raises(UsageError, match="not an http:// or https:// URL"):
        endpoint_inside("ftp://example.com")


@pytest.mark.skipif(commands.sandbox_problem() is not None, reason="needs bubblewrap")
def test_a_turn_gets_its_own_network_and_a_private_socket_folder_beside_its_state() -> None:
    with tempfile.TemporaryDirectory(prefix="cairn-") as short:  # pytest's are too deep
        state = Path(short) / "agent-state" / "job-1"
        state.mkdir(parents=True)
        _beside(state)


def _beside(state: Path) -> None:
    with network_plan("http://localhost:8000/v1", state) as plan:
        assert not plan.share_host and "--unshare-net" in plan.bwrap_args
        assert plan.endpoint == "http://127.0.0.1:8000/v1"
        assert plan.environment["HTTPS_PROXY"].startswith("http://127.0.0.1:")
        [folder] = (state.parent / "egress").iterdir()
        assert folder.stat().st_mode & 0o077 == 0, "cairn's own"
        assert str(folder) in plan.bwrap_args
        assert not folder.is_relative_to(state), "outside what the sandbox may write"
    assert list((state.parent / "egress").iterdir()) == []


@pytest.mark.skipif(commands.sandbox_problem() is not None, reason="needs bubblewrap")
def test_a_state_folder_too_deep_for_a_socket_path_puts_the_sockets_in_a_temporary_folder(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 80) / "job-1"
    deep.mkdir(parents=True)
    with network_plan("https://api.openai.com/v1", deep) as plan:
        folder = Path(plan.bwrap_args[plan.bwrap_args.index("--ro-bind") + 1])
        assert folder.name.startswith("cairn-egress-") and folder.is_dir()
        assert plan.endpoint == "https://api.openai.com/v1"
    assert not folder.exists()
    assert not (deep.parent / "egress").exists()


def test_without_a_sandbox_the_host_network_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_process.commands, "sandbox_problem", lambda: "no bubblewrap")
    with network_plan("http://127.0.0.1:9/", tmp_path) as plan:
        assert plan.share_host and plan.bwrap_args == () and plan.endpoint == "http://127.0.0.1:9/"
