"""SandboxPolicy: what a command may reach beyond the default sandbox, and nothing more."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from cairn.workspace.commands import (
    DEFAULT_POLICY,
    SandboxPolicy,
    run_in_workspace,
    sandbox_problem,
)

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason="needs bubblewrap")
OPEN = SandboxPolicy(network=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


def test_the_default_policy_adds_nothing() -> None:
    assert SandboxPolicy() == DEFAULT_POLICY
    assert not DEFAULT_POLICY.network and not DEFAULT_POLICY.environment
    assert DEFAULT_POLICY.read_only_binds == () and DEFAULT_POLICY.on_output is None


@pytest.mark.parametrize(("policy", "reached"), [(DEFAULT_POLICY, False), (OPEN, True)])
def test_the_network_is_off_unless_the_policy_opens_it(
    workspace: Path, policy: SandboxPolicy, reached: bool
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        result = run_in_workspace(
            f"'{sys.executable}' -c \"{connect}\" && echo REACHED",
            workspace,
            timeout=60,
            policy=policy,
        )
    assert result.sandboxed
    assert ("REACHED" in result.output) is reached, result.output


def test_an_extra_read_only_bind_is_readable_and_not_writable(
    workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shared = home / "models"
    shared.mkdir(parents=True)
    (shared / "weights.txt").write_text("readable\n")
    command = (
        f"cat '{shared}/weights.txt'; echo x > '{shared}/weights.txt' || echo REFUSED; "
        f"echo y > '{shared}/new.txt' || echo REFUSED; ls '{home}'"
    )
    policy = SandboxPolicy(read_only_binds=(shared,))
    # Bound inside a hidden folder, it shows through the cover, and only it does.
    (home / "secret.txt").write_text("hidden\n")
    result = run_in_workspace(command, workspace, timeout=60, hidden=(home,), policy=policy)
    assert result.sandboxed and result.exit_code == 0, result.output
    assert "readable" in result.output and result.output.count("REFUSED") == 2
    assert "secret.txt" not in result.output
    assert (shared / "weights.txt").read_text() == "readable\n"
    assert not (shared / "new.txt").exists()


def test_cairns_own_python_is_there_read_only_even_under_a_covered_folder(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cairn installed in a venv under /tmp (covered in every sandbox): the coding CLIs start
    # cairn's tool server with that Python inside the sandbox.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "tool").write_text("cairn's own\n")
    monkeypatch.setattr(sys, "prefix", str(venv))
    command = f"cat '{venv}/bin/tool'; echo x > '{venv}/bin/tool' || echo REFUSED"
    result = run_in_workspace(command, workspace, timeout=60)
    assert result.exit_code == 0 and "cairn's own" in result.output, result.output
    assert "REFUSED" in result.output and (venv / "bin" / "tool").read_text() == "cairn's own\n"


def test_a_python_folder_that_holds_a_hidden_one_is_not_shown(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "venv" / "home"  # cairn's home inside its venv: it stays hidden
    home.mkdir(parents=True)
    (home / "cairn.db").write_text("the store\n")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    command = f"cat '{home}/cairn.db'; echo ran"
    result = run_in_workspace(command, workspace, timeout=60, hidden=(home,))
    assert result.exit_code == 0 and "ran" in result.output, result.output
    assert "the store" not in result.output


def test_a_missing_read_only_bind_is_simply_absent(workspace: Path, tmp_path: Path) -> None:
    policy = SandboxPolicy(read_only_binds=(tmp_path / "nowhere",))
    result = run_in_workspace("echo ran", workspace, timeout=60, policy=policy)
    assert result.exit_code == 0 and "ran" in result.output


def test_a_policy_s_environment_reaches_the_command(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_ONLY", "not passed")
    policy = SandboxPolicy(environment={"PIP_INDEX_URL": "http://127.0.0.1:1/simple"})
    result = run_in_workspace(
        'echo "index=$PIP_INDEX_URL runner=${RUNNER_ONLY:-unset}"',
        workspace,
        timeout=60,
        policy=policy,
    )
    assert "index=http://127.0.0.1:1/simple runner=unset" in result.output


@pytest.mark.parametrize("name", ["CAIRN_DATABASE_URL", "HOME", "TMPDIR"])
def test_a_policy_may_not_set_cairn_s_own_variables(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SandboxPolicy(environment={name: "x"})


def test_the_output_callback_sees_all_the_output_in_order(workspace: Path) -> None:
    pieces: list[str] = []
    policy = SandboxPolicy(on_output=pieces.append)
    command = "for i in 1 2 3; do echo line $i; done; printf 'caf\\303\\251'; echo oops >&2"
    result = run_in_workspace(command, workspace, timeout=60, policy=policy)
    assert result.exit_code == 0
    assert "".join(pieces) == result.output == "line 1\nline 2\nline 3\ncafé" + "oops\n"
