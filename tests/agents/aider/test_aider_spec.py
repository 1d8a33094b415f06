"""The aider adapter's spec, command line and output reading, without running Aider."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.agents.aider_cli import AiderCli, AiderOutput, aider_spec, litellm_model
from cairn.agents.cli_agent import CliTurnPlan
from cairn.agents.registry import get_agent, load_agent_spec
from cairn.errors import UsageError


def _plan(tmp_path: Path, *, resume: bool) -> CliTurnPlan:
    return CliTurnPlan(
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        session_id="s",
        resume=resume,
        prompt="Add a file\n\nwith two lines",
        endpoint="http://127.0.0.1:9/v1",
        api_key="sk-secret-key-123456",
        mcp_config={},
        model="qwen2.5-coder",
    )


def test_the_spec_needs_a_model_and_refuses_what_it_does_not_know() -> None:
    assert load_agent_spec("aider:qwen2.5-coder")["model"] == "qwen2.5-coder"
    with pytest.raises(UsageError, match="--agent aider:MODEL"):
        load_agent_spec("aider:")
    with pytest.raises(UsageError, match="no setting 'api_key'"):
        aider_spec({"model": "m", "api_key": "x"})
    with pytest.raises(UsageError, match="edit_format is one of"):
        aider_spec({"model": "m", "edit_format": "yaml"})
    assert repr(get_agent(load_agent_spec("aider:m"))).startswith("AiderAgent(")


def test_the_model_is_named_for_an_openai_compatible_endpoint() -> None:
    assert litellm_model("gpt-4o") == "openai/gpt-4o"
    assert litellm_model("openai/gpt-4o") == "openai/gpt-4o"


def test_the_command_line_resumes_only_the_jobs_own_history(tmp_path: Path) -> None:
    cli = AiderCli("whole")
    first = cli.command_line("aider", _plan(tmp_path, resume=False))
    later = cli.command_line("aider", _plan(tmp_path, resume=True))
    assert "--no-restore-chat-history" in first and "--restore-chat-history" in later
    history = str(tmp_path / "state" / "aider" / "chat-history.md")
    assert first[first.index("--chat-history-file") + 1] == history
    for argv in (first, later):
        assert not {"--continue", "--last", "--git", "--auto-commits"} & set(argv)
        assert "--no-git" in argv and "--llm-history-file" not in argv
        assert "sk-secret-key-123456" not in " ".join(argv)
        assert "Add a file" not in " ".join(argv), "the prompt goes in its file"
    message = Path(first[first.index("--message-file") + 1])
    assert message.read_text() == "Add a file\n\nwith two lines"
    environment = cli.environment(_plan(tmp_path, resume=False))
    assert sorted(environment) == ["OPENAI_API_BASE", "OPENAI_API_KEY"]


def test_the_output_becomes_edits_usage_and_how_the_turn_ended(tmp_path: Path) -> None:
    reader = AiderOutput(tmp_path)
    for line in ("Here is the secret plan.", "Tokens: 2.5k sent, 120 received.",
                 "greeting.txt", f"Applied edit to {tmp_path / 'a' / 'b.txt'}",
                 "Applied edit to /elsewhere/x.json"):  # fmt: skip
        reader.feed(line)
    report = reader.report
    assert [a.target for a in report.activity] == ["a/b.txt", "(outside the workspace)"]
    assert (report.usage.input_tokens, report.usage.output_tokens) == (2500, 120)
    assert report.final is not None and not report.lost_connection and report.failure is None
    assert "secret plan" not in repr(report)


def test_a_retried_drop_goes_on_and_a_drop_without_retry_is_lost() -> None:
    retried = AiderOutput(Path("/ws"))
    for line in ("hellitellm.APIConnectionError: peer closed", "Retrying in 0.2 seconds...",
                 "Tokens: 10 sent, 5 received."):  # fmt: skip
        retried.feed(line)
    assert not retried.report.lost_connection
    lost = AiderOutput(Path("/ws"))
    for line in ("litellm.APIConnectionError: peer closed", "Retrying in 0.2 seconds...",
                 "helitellm.APIConnectionError: APIConnectionError: peer closed"):  # fmt: skip
        lost.feed(line)
    assert lost.report.lost_connection and lost.report.final is not None
    refused = AiderOutput(Path("/ws"))
    refused.feed("litellm.AuthenticationError: AuthenticationError: OpenAIException - bad key")
    assert refused.report.failure is not None and "OPENAI_API_KEY" in refused.report.failure
    assert not refused.report.lost_connection
