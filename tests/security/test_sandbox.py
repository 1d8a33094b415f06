"""Commands run in a bubblewrap sandbox: only the workspace and a private temporary folder are
writable, `.git` and cairn's home are out of reach, the network is off, capabilities are gone.
Where no sandbox can be had, commands are refused unless the caller allows running unsandboxed.
"""

from __future__ import annotations

import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.support import ContextStore, run_script, snapshot, turn_for
from cairn.agents import OutcomeKind, ScriptAgent, parse_script
from cairn.errors import BoundaryError, WorkspaceError
from cairn.testing.repos import make_sample_repo
from cairn.workspace import commands
from cairn.workspace.commands import run_in_workspace, sandbox_problem
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without bubblewrap."""
    monkeypatch.setattr(commands, "_bwrap_path", lambda: None)


def run(command: str, workspace: Path, **options: object) -> commands.CommandResult:
    return run_in_workspace(command, workspace, timeout=60, **options)  # type: ignore[arg-type]


def test_bubblewrap_works_here() -> None:
    assert sandbox_problem() is None, sandbox_problem()


def test_only_the_workspace_and_a_private_temporary_folder_are_writable(
    workspace: Path, outside: Path
) -> None:
    result = run(
        'echo in > inside.txt && echo tmp > "$TMPDIR/t" && echo home > "$HOME/h" && '
        f"for target in '{outside}/secret.txt' '{outside}/new.txt' /etc/cairn-pwned "
        f"'{sys.prefix}/pwned'; do echo pwned > \"$target\" && echo WROTE $target; done; true",
        workspace,
    )
    assert result.sandboxed and result.exit_code == 0, result
    assert "WROTE" not in result.output and "Read-only file system" in result.output
    assert (workspace / "inside.txt").read_text() == "in\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "keep me\n"
    assert not Path("/etc/cairn-pwned").exists()


def test_the_git_folder_cannot_be_changed_or_removed(workspace: Path) -> None:
    before = snapshot(workspace / ".git")
    result = run(
        "echo x >> .git/config; rm -rf .git; mv .git moved; ln -s /tmp .git/evil; true", workspace
    )
    assert result.sandboxed
    assert snapshot(workspace / ".git") == before and not (workspace / "moved").exists()


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_the_network_is_off(workspace: Path, listening: int) -> None:
    probe = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {listening}), timeout=3)\n"
        "    print('CONNECTED')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n"
    )
    (workspace / "probe.py").write_text(probe)
    result = run(f"'{sys.executable}' probe.py", workspace)
    assert result.sandboxed and result.exit_code == 0, result.output
    assert "refused" in result.output and "CONNECTED" not in result.output


def test_capabilities_are_dropped_and_the_interpreter_works(workspace: Path) -> None:
    result = run(f"grep CapEff /proc/self/status; '{sys.executable}' -c 'print(6 * 7)'", workspace)
    assert result.sandboxed and result.exit_code == 0, result.output
    assert "CapEff:\t0000000000000000" in result.output and "42" in result.output


def test_hidden_folders_are_invisible_but_the_workspace_and_its_git_stay(tmp_path: Path) -> None:
    home = tmp_path / "cairn-home"
    repo = make_sample_repo(tmp_path / "repo")
    mirror = Mirror(home / "mirrors" / "room.git", str(repo), "main")
    tree = Worktree(mirror, home / "workspaces" / "job-1", "cairn/job-1")
    tree.ensure(mirror.fetch_baseline())
    (home / "cairn.db").write_text("every room's requests\n")
    (home / "workspaces" / "job-2").mkdir()
    (home / "workspaces" / "job-2" / "other.txt").write_text("another job\n")
    result = run(
        f"cat '{home}/cairn.db'; ls '{home}/workspaces'; echo made > new.txt; "
        "git status --porcelain; git log --oneline | wc -l",
        tree.path,
        hidden=[home],
    )
    assert result.sandboxed, result
    assert "every room" not in result.output and "job-2" not in result.output
    assert "?? new.txt" in result.output, result.output
    assert tree.is_valid() and (tree.path / "new.txt").exists()


def test_a_real_worktrees_git_pointer_is_read_only(tmp_path: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    mirror = Mirror(tmp_path / "home" / "mirror.git", str(repo), "main")
    tree = Worktree(mirror, tmp_path / "home" / "job-1", "cairn/job-1")
    tree.ensure(mirror.fetch_baseline())
    pointer = (tree.path / ".git").read_text()
    outcome, _ = run_script(
        "steps: [run: 'echo gitdir: /tmp/evil > .git; rm -f .git; mv .git x; true']", tree.path
    )
    assert outcome.kind is not OutcomeKind.failed, outcome
    assert (tree.path / ".git").read_text() == pointer and tree.is_valid()


def test_a_command_that_leaves_a_symlink_out_fails_its_step(workspace: Path, outside: Path) -> None:
    (workspace / "docs").mkdir()
    script = parse_script(
        f"steps: [run: \"rm -rf docs && ln -s '{outside}' docs\", "
        "write: {path: docs/secret.txt, content: pwned}, finish: {}]"
    )
    outcome, store = run_script(script, workspace)
    assert outcome.kind is OutcomeKind.failed
    assert "leads outside the workspace through a symlink" in (outcome.diagnosis or "")
    assert str(outside) not in (outcome.diagnosis or "")
    assert store.last is not None and store.last["position"] == 1, "the write never ran"
    assert (outside / "secret.txt").read_text() == "keep me\n"


def test_a_link_into_git_made_by_a_command_fails_its_step(workspace: Path) -> None:
    outcome, _ = run_script("steps: [run: 'ln -s .git/config cfg', finish: {}]", workspace)
    assert outcome.kind is OutcomeKind.failed and ".git" in (outcome.diagnosis or "")


def test_a_command_cannot_hard_link_a_file_from_outside(workspace: Path, outside: Path) -> None:
    result = run(f"ln '{outside}/secret.txt' stolen.txt", workspace)
    assert result.exit_code != 0 and not (workspace / "stolen.txt").exists()


def test_without_a_sandbox_commands_are_refused_with_what_to_do(
    workspace: Path, no_sandbox: None
) -> None:
    with pytest.raises(WorkspaceError, match=r"apt-get install bubblewrap") as refused:
        run("echo hi > ran.txt", workspace)
    assert "bubblewrap is not installed" in str(refused.value)
    assert not (workspace / "ran.txt").exists()


def test_the_scope_may_allow_unsandboxed_commands_and_that_is_recorded(
    workspace: Path, no_sandbox: None
) -> None:
    result = run("echo hi > ran.txt", workspace, allow_unsandboxed=True)
    assert result.exit_code == 0 and not result.sandboxed
    store = ContextStore()
    turn = turn_for(workspace, store)
    from dataclasses import replace

    outcome = ScriptAgent(parse_script("steps: [run: 'true', finish: {}]")).run_turn(
        replace(turn, allow_unsandboxed=True)
    )
    assert outcome.isolation_unproven and store.last is not None and store.last["unsandboxed"]


def test_the_boundary_holds_without_a_sandbox_too(
    workspace: Path, outside: Path, no_sandbox: None
) -> None:
    with pytest.raises(BoundaryError, match="hard link"):
        run(f"ln '{outside}/secret.txt' stolen.txt", workspace, allow_unsandboxed=True)
    with pytest.raises(BoundaryError, match="through a symlink"):
        run(f"ln -s '{outside}' out", workspace, allow_unsandboxed=True)


def test_a_broken_bubblewrap_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(commands, "_bwrap_path", lambda: str(fake))
    problem = sandbox_problem() or ""
    assert "cannot create one here" in problem and "user namespaces" in problem


def test_materialized_dependencies_are_read_only_and_first_on_path(workspace: Path) -> None:
    """Only folders cairn materialized (marked) are protected; anything else stays writable."""
    venv_bin = workspace / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (workspace / ".venv" / commands.DEPENDENCY_MARKER).write_text("f" * 64 + "\n")
    tool = venv_bin / "greet-tool"
    tool.write_text("#!/bin/sh\necho from the venv\n")
    tool.chmod(0o755)
    (workspace / "node_modules").mkdir()  # not materialized by cairn: no marker
    result = run(
        "greet-tool; echo $VIRTUAL_ENV; echo x >> .venv/bin/greet-tool || echo REFUSED; "
        "touch .venv/new || echo REFUSED-NEW; touch node_modules/mine && echo WROTE-OWN",
        workspace,
    )
    assert result.sandboxed and result.exit_code == 0, result
    lines = result.output.splitlines()
    assert lines[0] == "from the venv" and lines[1] == str(workspace.resolve() / ".venv")
    assert "REFUSED" in lines and "REFUSED-NEW" in lines and "WROTE-OWN" in lines
    assert tool.read_text() == "#!/bin/sh\necho from the venv\n"
    assert not (workspace / ".venv" / "new").exists()


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
def test_a_forge_token_in_cairns_environment_never_reaches_a_command(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: bool
) -> None:
    from cairn.workspace.askpass import TOKEN_VARIABLE

    token = "ghp_ForgeTokenThatMustStayWithCairn01"
    # A room's --forge-token-env variable, and the one cairn's own git calls get.
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    monkeypatch.setenv("CAIRN_SECRET_KEY", "a-secret-key-of-enough-length")
    if not sandboxed:
        monkeypatch.setattr(commands, "_bwrap_path", lambda: None)
    result = run("env; cat /proc/self/environ | tr '\\0' '\\n'", workspace, allow_unsandboxed=True)
    assert result.exit_code == 0 and "PATH=" in result.output
    assert result.sandboxed is sandboxed
    assert token not in result.output and "a-secret-key" not in result.output


def test_the_runners_credential_files_and_the_hosts_tmp_are_out_of_reach(
    workspace: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command (whose output an agent's model may see) reads no credential of the runner."""
    home = Path("/var/tmp") / f"cairn-runner-home-{tmp_path_factory.getbasetemp().name}"
    (home / ".config" / "gh").mkdir(parents=True, exist_ok=True)
    (home / ".git-credentials").write_text("https://bot:ghp_NOTREALNOTREAL@github.com\n")
    (home / ".config" / "gh" / "hosts.yml").write_text("oauth_token: gho_NOTREAL\n")
    (home / "notes.txt").write_text("an ordinary file\n")
    other_job = tmp_path_factory.mktemp("another-jobs-tmp") / "scratch.txt"
    other_job.write_text("another job's temporary file\n")
    monkeypatch.setenv("HOME", str(home))
    try:
        result = run(
            f"cat '{home}/.git-credentials' '{home}/.config/gh/hosts.yml' '{other_job}'; "
            f"cat '{home}/notes.txt'; echo kept > mine.txt",
            workspace,
        )
    finally:
        shutil.rmtree(home)
    assert result.sandboxed, result
    assert "ghp_" not in result.output and "gho_" not in result.output
    assert "another job" not in result.output
    assert "an ordinary file" in result.output, "only credentials are hidden, not the home"
    assert (workspace / "mine.txt").read_text() == "kept\n"
