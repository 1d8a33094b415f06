"""The `claude` spec: `--agent claude[:MODEL]`, named agents, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.agents.claude_code import ClaudeCode, ClaudeCodeAgent, claude_spec
from cairn.agents.cli_agent import CliTurnPlan
from cairn.agents.cli_session import session_id
from cairn.agents.registry import get_agent, load_agent_spec
from cairn.config import Config
from cairn.errors import UsageError

KEY = "sk-ant-" + "api03-9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c"


def test_agent_claude_with_and_without_a_model_stores_every_default() -> None:
    assert load_agent_spec("claude") == load_agent_spec("claude:")
    assert load_agent_spec("claude:claude-sonnet-4-5") == {
        "adapter": "claude",
        "model": "claude-sonnet-4-5",
        "command": None,
        "max_retries": 2,
        "timeout": 3600.0,
    }


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"model": "two words"}, "--model names a Claude model"),
        ({"model": KEY}, "credential"),
        ({"command": ""}, "--command is the path"),
        ({"max_retries": 50}, "max_retries"),
        ({"timeout": 1}, "timeout"),
        ({"api_key": KEY}, "no setting 'api_key'"),
    ],
)
def test_bad_settings_are_usage_errors_saying_what_to_do(
    given: dict[str, object], said: str
) -> None:
    with pytest.raises(UsageError) as refused:
        claude_spec(given)
    assert said in str(refused.value) and KEY not in str(refused.value)


def test_the_runner_gives_the_endpoint_and_key_the_spec_never_holds(tmp_path: Path) -> None:
    environment = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "ANTHROPIC_API_KEY": KEY}
    config = Config(home=tmp_path, environment=environment)
    agent = get_agent(load_agent_spec("claude"), config)
    assert isinstance(agent, ClaudeCodeAgent)
    assert agent.base_url == "http://127.0.0.1:9" and KEY not in repr(agent)


def test_the_command_line_resumes_by_id_and_never_continues_the_last_session(
    tmp_path: Path,
) -> None:
    workspace = Path("/srv/work/job_1.x")
    plan = CliTurnPlan(workspace, tmp_path / "state", "sid", False, "do it", "http://x", KEY, {})
    module = ClaudeCode()
    first = module.command_line("claude", plan)
    later = module.command_line("claude", CliTurnPlan(**{**plan.__dict__, "resume": True}))
    assert first[first.index("--session-id") + 1] == "sid" and "--resume" not in first
    assert later[later.index("--resume") + 1] == "sid" and "--session-id" not in later
    for argv in (first, later):
        assert "--continue" not in argv and "-c" not in argv and KEY not in " ".join(argv)
        assert "--dangerously-skip-permissions" in argv, "writable on every turn, resumed too"
    environment = module.environment(plan)
    assert environment["ANTHROPIC_API_KEY"] == KEY and environment["IS_SANDBOX"] == "1"
    assert not any(name.startswith("CAIRN_") for name in environment)
    projects = tmp_path / "state" / "claude" / "projects"
    assert module.session_file(plan) == projects / "-srv-work-job-1-x" / "sid.jsonl"


def test_a_session_id_is_the_jobs_own() -> None:
    assert session_id("inst", 1) == session_id("inst", 1)
    assert len({session_id("inst", 1), session_id("inst", 2), session_id("other", 1)}) == 3
    assert session_id("inst", 1, generation=1) != session_id("inst", 1)
