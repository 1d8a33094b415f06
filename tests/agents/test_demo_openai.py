"""`cairn demo --agent openai`: the scripted server's answers make the scripted agent's change.

Replayed here through a bare `openai` SDK loop over real HTTP (no cairn adapter), so the
demo's model script is checked on its own; the end-to-end run is in tests/acceptance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from cairn.agents.model_tools import openai_tools
from cairn.agents.script_format import FinishStep, parse_script
from cairn.demo import REQUEST, demo_script
from cairn.demo_agents import DEFAULT_MODEL, DEMO_KEY_ENV, demo_answers, openai_agent
from cairn.errors import UsageError
from cairn.testing.repos import SAMPLE_FILES


def _bare_loop(base_url: str, model: str, workspace: Path) -> tuple[list[str], str]:
    """A minimal tool-calling loop: apply file edits, acknowledge the rest, stop at finish."""
    client = OpenAI(base_url=base_url, api_key="any", max_retries=0)
    messages: list[Any] = [
        {"role": "system", "content": "You change a repository with tools."},
        {"role": "user", "content": REQUEST},
    ]
    called: list[str] = []
    for _ in range(20):
        answer = client.chat.completions.create(
            model=model,
            messages=messages,
            tools=openai_tools(),  # type: ignore[arg-type]
        )
        message = answer.choices[0].message
        assert message.tool_calls, "every answer of the demo's script is a tool call"
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            name = call.function.name  # type: ignore[union-attr]
            args = json.loads(call.function.arguments)  # type: ignore[union-attr]
            called.append(name)
            if name == "finish":
                return called, args["summary"]
            result = _apply(workspace, name, args)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the script never called finish")


def _apply(workspace: Path, name: str, args: dict[str, Any]) -> str:
    if name == "write_file":
        target = workspace / args["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args["content"])
    elif name == "replace_in_file":
        target = workspace / args["path"]
        text = target.read_text()
        assert text.count(args["old"]) == 1, "replace_in_file's old text occurs exactly once"
        target.write_text(text.replace(args["old"], args["new"]))
    return "ok"


def test_the_demo_model_makes_the_scripted_agents_change_through_the_tools(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "README.md").write_text(SAMPLE_FILES["README.md"])
    with openai_agent(REQUEST, demo_script(), environ={}) as agent:
        assert agent.server is not None
        called, summary = _bare_loop(agent.server.base_url, agent.spec["model"], workspace)
        assert agent.server.remaining(REQUEST) == 0
        offered = agent.server.requests_for(REQUEST)[0].tool_names
    assert called == [
        "write_file",
        "request_dependency",
        "run",
        "write_file",
        "replace_in_file",
        "run",
        "finish",
    ]
    assert set(called) <= set(offered)
    assert "def greet(name: str) -> str:" in (workspace / "src/greet.py").read_text()
    assert 'greet("Ada") == "Hello, Ada!"' in (workspace / "tests/test_greet.py").read_text()
    readme = (workspace / "README.md").read_text()
    assert readme.startswith(SAMPLE_FILES["README.md"])
    assert readme.endswith("`src/greet.py` provides `greet(name)`.\n")
    final = parse_script(demo_script()).steps[-1]
    assert isinstance(final, FinishStep) and summary == final.summary


def test_the_scripted_demo_spec_points_at_its_own_server_with_its_own_key_variable() -> None:
    with openai_agent(REQUEST, demo_script(), environ={"OPENAI_API_KEY": "sk-real"}) as agent:
        assert agent.server is not None
        assert agent.spec["base_url"] == agent.server.base_url
        assert agent.spec["api_key_env"] == DEMO_KEY_ENV  # a real key never goes to the fake
        assert agent.spec["adapter"] == "openai"


def test_a_real_endpoint_is_used_when_openai_base_url_is_set() -> None:
    environ = {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/", "OPENAI_MODEL": "qwen-coder"}
    with openai_agent(REQUEST, demo_script(), environ) as agent:
        assert agent.server is None
        assert agent.spec["base_url"] == "http://127.0.0.1:8000/v1"
        assert agent.spec["model"] == "qwen-coder"
        assert agent.spec["api_key_env"] == "OPENAI_API_KEY"
    with openai_agent(REQUEST, demo_script(), {"OPENAI_BASE_URL": "http://h/v1"}) as agent:
        assert agent.spec["model"] == DEFAULT_MODEL
    with openai_agent(REQUEST, demo_script(), {"OPENAI_BASE_URL": "http://h/v1"}, "m2") as agent:
        assert agent.spec["model"] == "m2"


def test_a_base_url_with_credentials_in_openai_base_url_is_refused_unechoed() -> None:
    environ = {"OPENAI_BASE_URL": "https://user:hunter2-pass@api.example.com/v1"}
    with pytest.raises(UsageError) as refused, openai_agent(REQUEST, demo_script(), environ):
        pass
    assert "OPENAI_BASE_URL carries credentials" in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_every_demo_answer_is_one_tool_call() -> None:
    answers = demo_answers(demo_script())
    assert [len(a.tool_calls) for a in answers] == [1] * len(answers)
