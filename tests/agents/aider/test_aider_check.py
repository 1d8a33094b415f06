"""`cairn agent check` for aider agents: the real Aider against a scripted server (markers
anywhere: Aider opens its conversation with its own examples)."""

from __future__ import annotations

from pathlib import Path

from tests.agents.check_support import CheckCli, assert_private, by_name, statuses

from cairn.agents.checks import CHECK_MARKER
from cairn.testing import ScriptedOpenAIServer, text_answer
from cairn.testing.openai_server import TEST_API_KEY

WRONG_KEY = "sk-proj-" + "Wr0ngKeyWr0ngKeyWr0ngKey0123"
ALL = ("binary", "key set", "base url", "bubblewrap", "socat", "endpoint", "key", "turn")


def _check(tmp_path: Path, server: ScriptedOpenAIServer, cli: Path, key: str) -> tuple:
    checker = CheckCli(tmp_path / "home", tmp_path)
    checker("init")
    checker("agent", "add", "ai", "--adapter", "aider", "--model", "cairn-scripted",
            "--command", str(cli))  # fmt: skip
    env = {"OPENAI_API_BASE": server.base_url, "OPENAI_API_KEY": key}
    return checker.check("ai", env=env, expect=None)


def test_a_working_aider_passes_every_check(
    aider_server: ScriptedOpenAIServer, aider_cli: Path, tmp_path: Path
) -> None:
    aider_server.add_answers(CHECK_MARKER, text_answer("OK"))
    report, done = _check(tmp_path, aider_server, aider_cli, TEST_API_KEY)
    assert done.returncode == 0 and statuses(report) == dict.fromkeys(ALL, "passed"), report
    assert by_name(report, "binary")["reason"].startswith("aider ")
    assert_private(done.stdout, TEST_API_KEY, str(tmp_path))


def test_a_wrong_key_fails_naming_the_variable(
    aider_server: ScriptedOpenAIServer, aider_cli: Path, tmp_path: Path
) -> None:
    aider_server.add_answers(CHECK_MARKER, text_answer("never"))
    report, done = _check(tmp_path, aider_server, aider_cli, WRONG_KEY)
    assert done.returncode == 1
    refused = by_name(report, "key")
    assert refused["status"] == "failed" and "OPENAI_API_KEY" in refused["reason"], report
    assert_private(done.stdout, WRONG_KEY, str(tmp_path))
