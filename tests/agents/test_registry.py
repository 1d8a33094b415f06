"""The agent registry: short names to adapters, and `--agent` values to stored specs."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

import cairn.agents
from cairn.agents import (
    AGENTS,
    OpenAIAgent,
    OutcomeKind,
    ScriptAgent,
    get_agent,
    load_agent_spec,
    parse_script,
    script_to_data,
)
from cairn.errors import ScriptError, UsageError

from .support import ContextStore, turn_for

VALID = "valid adapters: aider, claude, codex, openai, script"


def test_the_public_surface_is_exactly_all() -> None:
    # "@py_builtins" and "@pytest_ar" are pytest's: it rewrites the asserts of every module of
    # a distribution that ships a pytest plugin, cairn's included.
    public = {
        name
        for name, value in vars(cairn.agents).items()
        if not name.startswith(("_", "@")) and not isinstance(value, ModuleType)
    }
    assert set(cairn.agents.__all__) == public - {"annotations"}
    assert all(hasattr(cairn.agents, name) for name in cairn.agents.__all__)


def test_script_openai_claude_codex_and_aider_are_the_registered_adapters() -> None:
    from cairn.agents.aider_cli import AiderAgent
    from cairn.agents.claude_code import ClaudeCodeAgent
    from cairn.agents.codex_cli import CodexCliAgent

    assert dict(AGENTS) == {
        "script": ScriptAgent,
        "openai": OpenAIAgent,
        "claude": ClaudeCodeAgent,
        "codex": CodexCliAgent,
        "aider": AiderAgent,
    }
    assert ScriptAgent.name == "script"


def test_get_agent_builds_a_script_agent_from_its_stored_spec(workspace: Path) -> None:
    script = parse_script("steps: [write: {path: a.txt, content: a}, finish: {summary: s}]")
    spec = json.loads(json.dumps({"adapter": "script", "script": script_to_data(script)}))
    agent = get_agent(spec)
    assert isinstance(agent, ScriptAgent)
    assert agent.script == script
    outcome = agent.run_turn(turn_for(workspace, ContextStore()))
    assert outcome.kind is OutcomeKind.changed
    assert (workspace / "a.txt").read_text() == "a"


def test_get_agent_accepts_a_command_timeout() -> None:
    agent = get_agent({"adapter": "script", "script": {"steps": []}, "command_timeout": 5})
    assert isinstance(agent, ScriptAgent)
    assert agent.command_timeout == 5.0


@pytest.mark.parametrize(
    "spec",
    [{"adapter": "foo"}, {}, {"adapter": 3}, {"adapter": "/home/me/script.yaml"}, "script"],
)
def test_an_unknown_adapter_names_the_valid_ones(spec: object) -> None:
    with pytest.raises(
        UsageError, match="valid adapters: aider, claude, codex, openai, script"
    ) as caught:
        get_agent(spec)  # type: ignore[arg-type]
    assert "/home/me" not in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"adapter": "script"}, "has no script"),
        ({"adapter": "script", "script": {"steps": []}, "command_timeout": 0}, "positive number"),
        ({"adapter": "script", "script": {"steps": []}, "command_timeout": "5"}, "positive"),
    ],
)
def test_a_bad_script_spec_is_a_usage_error(spec: dict[str, object], expected: str) -> None:
    with pytest.raises(UsageError, match=expected):
        get_agent(spec)


def test_a_stored_spec_with_a_bad_script_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match="step 1"):
        get_agent({"adapter": "script", "script": {"steps": [{"nope": {}}]}})


def test_load_agent_spec_reads_and_parses_the_file_now(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text("steps:\n  - write: {path: a.txt, content: one}\n")
    spec = load_agent_spec(f"script:{path}")
    # The job stores the parsed script: editing the file later changes nothing for it.
    path.write_text("steps: [fail: edited]\n")
    assert spec == {
        "adapter": "script",
        "script": {"steps": [{"write": {"path": "a.txt", "content": "one"}}]},
    }
    assert json.loads(json.dumps(spec)) == spec
    assert get_agent(spec).script == parse_script("steps: [write: {path: a.txt, content: one}]")


def test_load_agent_spec_for_an_unknown_adapter_names_the_valid_ones() -> None:
    refused = r"unknown agent adapter 'foo'; valid adapters: aider, claude, codex, openai, script"
    with pytest.raises(UsageError, match=refused):
        load_agent_spec("foo:bar")


def test_load_agent_spec_without_a_file_says_how_to_give_one() -> None:
    for value in ("script", "script:", "script:  "):
        with pytest.raises(UsageError, match=r"for example --agent script:demo\.yaml"):
            load_agent_spec(value)


def test_a_missing_script_file_names_only_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "deep" / "missing.yaml"
    with pytest.raises(
        UsageError, match=r"no script file named 'missing\.yaml' was found"
    ) as caught:
        load_agent_spec(f"script:{missing}")
    assert str(tmp_path) not in str(caught.value)


def test_a_folder_instead_of_a_script_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder") as caught:
        load_agent_spec(f"script:{tmp_path}")
    assert str(tmp_path.parent) not in str(caught.value)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"steps: [\n", r"^bad\.yaml: the script is not valid YAML"),
        (b"steps: [write: {path: ../x, content: y}]", r"^bad\.yaml: step 1 \(write\)"),
        (b"\xff\xfe\x00", r"^bad\.yaml: the script is not UTF-8 text"),
    ],
)
def test_a_bad_script_file_names_only_the_file(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ScriptError, match=expected) as caught:
        load_agent_spec(f"script:{path}")
    assert str(tmp_path) not in str(caught.value)


def test_a_value_without_an_adapter_does_not_echo_a_path() -> None:
    with pytest.raises(
        UsageError, match="valid adapters: aider, claude, codex, openai, script"
    ) as caught:
        load_agent_spec("/home/me/demo.yaml")
    assert "/home/me" not in str(caught.value)


@pytest.mark.parametrize(
    ("script", "step"),
    [
        ('steps: [fail: "the server refused ghp_Q1w2E3r4Q1w2E3r4Q1w2E3r4Q1w2E3r4Q1w2"]', 1),
        ("steps: [write: {path: a, content: x}, run: 'curl https://u:Pa55w0rdX@h.example/']", 2),
        ("steps: [write: {path: k.pem, content: '-----BEGIN PRIVATE KEY-----\nMIIE'}]", 1),
        ("steps: [write: {path: a, content: x}, finish: {summary: 'DB_PASSWORD=Pa55w0rdX'}]", 2),
    ],
)
def test_a_script_carrying_a_credential_is_refused(tmp_path: Path, script: str, step: int) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(script)
    with pytest.raises(UsageError, match=rf"looks like a credential \(in step {step} ") as caught:
        load_agent_spec(f"script:{path}")
    assert "Q1w2E3r4" not in str(caught.value) and "Pa55w0rd" not in str(caught.value)


def test_code_that_names_a_secret_without_holding_one_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "steps:\n  - write: {path: app.py, content: \"token = os.environ['API_TOKEN']\\n\"}\n"
        "  - run: 'git clone https://example.com/app.git'\n"
    )
    assert load_agent_spec(f"script:{path}")["script"]["steps"][1] == {
        "run": "git clone https://example.com/app.git"
    }


def test_a_script_file_over_the_limit_is_refused_without_reading_it_all() -> None:
    # /dev/zero never ends: only a bounded read can refuse it.
    with pytest.raises(ScriptError, match=r"larger than 256 KiB"):
        load_agent_spec("script:/dev/zero")
