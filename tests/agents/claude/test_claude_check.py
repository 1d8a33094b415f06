"""`cairn agent check` for claude agents: the real Claude Code CLI, through the real cairn CLI,
in cairn's sandbox, against a scripted Anthropic server on loopback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tests.agents.check_support import CheckCli, assert_private, by_name, closed_port, statuses

from cairn.agents.checks import CHECK_MARKER
from cairn.testing import ScriptedAnthropicServer, text_reply
from cairn.testing.anthropic_server import TEST_ANTHROPIC_KEY

WRONG_KEY = "sk-ant-wrong-key-00112233445566778899"
NEEDS = ("binary", "key set", "base url", "bubblewrap", "socat")
ALL = {name: "passed" for name in (*NEEDS, "endpoint", "key", "turn")}


@pytest.fixture
def cli(tmp_path: Path) -> CheckCli:
    checker = CheckCli(tmp_path / "home", tmp_path)
    checker("init")
    return checker


def _runner(
    server: ScriptedAnthropicServer, key: str | None = TEST_ANTHROPIC_KEY
) -> dict[str, str]:
    environment = {"ANTHROPIC_BASE_URL": server.base_url}
    return environment | ({"ANTHROPIC_API_KEY": key} if key is not None else {})


def _add(cli: CheckCli, binary: Path | str, name: str = "coder") -> None:
    cli("agent", "add", name, "--adapter", "claude", "--command", str(binary))


def test_a_working_claude_passes_every_check_in_a_throwaway_sandboxed_turn(
    cli: CheckCli,
    anthropic_server: ScriptedAnthropicServer,
    claude_code_cli: Path,
    tmp_path: Path,
) -> None:
    _add(cli, claude_code_cli)
    anthropic_server.add_answers(CHECK_MARKER, text_reply("OK"))
    store = cli.home / "cairn.db"
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    report, done = cli.check("coder", env=_runner(anthropic_server), expect=0)
    assert statuses(report) == ALL and report["ok"] is True, report
    assert by_name(report, "binary")["reason"].startswith("claude 2."), "by name, with version"
    asked = anthropic_server.requests_for(CHECK_MARKER)
    assert len(asked) == 1 and asked[0].key_matched
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before, "a check is not a job"
    assert_private(done.stdout + done.stderr, TEST_ANTHROPIC_KEY, str(tmp_path))
    assert str(claude_code_cli.parent) not in done.stdout


def test_a_missing_key_fails_and_no_turn_is_tried(
    cli: CheckCli, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    _add(cli, claude_code_cli)
    report, _ = cli.check("coder", env=_runner(anthropic_server, None), expect=1)
    missing = by_name(report, "key set")
    assert missing["status"] == "failed" and "ANTHROPIC_API_KEY is not set" in missing["reason"]
    assert statuses(report)["turn"] == "skipped"
    assert anthropic_server.requests == ()


def test_a_wrong_key_fails_naming_the_variable_never_the_key(
    cli: CheckCli,
    anthropic_server: ScriptedAnthropicServer,
    claude_code_cli: Path,
    tmp_path: Path,
) -> None:
    _add(cli, claude_code_cli)
    anthropic_server.add_answers(CHECK_MARKER, text_reply("never"))
    report, done = cli.check("coder", env=_runner(anthropic_server, WRONG_KEY), expect=1)
    refused = by_name(report, "key")
    assert refused["status"] == "failed" and "HTTP 401" in refused["reason"], report
    assert "ANTHROPIC_API_KEY" in refused["fix"]
    assert statuses(report)["endpoint"] == "passed"
    assert_private(done.stdout + done.stderr, WRONG_KEY, str(tmp_path))


def test_an_endpoint_that_is_down_fails_the_endpoint_check(
    cli: CheckCli, claude_code_cli: Path, tmp_path: Path
) -> None:
    env = {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{closed_port()}",
        "ANTHROPIC_API_KEY": TEST_ANTHROPIC_KEY,
    }
    report, done = cli.check(
        "--agent", "claude", env={**env, "PATH": _path_with(claude_code_cli)}, expect=1
    )
    down = by_name(report, "endpoint")
    assert down["status"] == "failed" and "ANTHROPIC_BASE_URL" in down["fix"], report
    assert statuses(report)["key"] == "skipped" and statuses(report)["turn"] == "skipped"
    assert_private(done.stdout, TEST_ANTHROPIC_KEY, str(tmp_path))


def test_a_missing_binary_fails_by_name_and_says_how_to_install_it(
    cli: CheckCli, anthropic_server: ScriptedAnthropicServer, tmp_path: Path
) -> None:
    _add(cli, tmp_path / "no-such" / "claude")
    report, done = cli.check("coder", env=_runner(anthropic_server), expect=1)
    binary = by_name(report, "binary")
    assert binary["status"] == "failed" and binary["reason"].startswith("claude is not found")
    assert "npm install" in binary["fix"] and "--command" in binary["fix"]
    assert statuses(report)["turn"] == "skipped"
    assert anthropic_server.requests == ()
    assert_private(done.stdout, str(tmp_path))


def _path_with(binary: Path) -> str:
    import os

    return f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}"


def test_a_binary_that_is_not_claude_code_fails_by_name(
    cli: CheckCli, anthropic_server: ScriptedAnthropicServer, tmp_path: Path
) -> None:
    impostor = tmp_path / "tools" / "claude"
    impostor.parent.mkdir()
    impostor.write_text("#!/bin/sh\nexit 3\n")
    impostor.chmod(0o755)
    _add(cli, impostor)
    report, done = cli.check("coder", env=_runner(anthropic_server), expect=1)
    binary = by_name(report, "binary")
    assert binary["status"] == "failed" and "does not say its version" in binary["reason"]
    assert statuses(report)["turn"] == "skipped" and anthropic_server.requests == ()
    assert_private(done.stdout, str(tmp_path))
