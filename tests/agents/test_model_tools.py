"""The model-facing tools: their OpenAI schemas, the call parser, the system prompt."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from cairn.agents.model_tools import (
    ALL_TOOLS,
    CallProblem,
    FinishArgs,
    SearchArgs,
    ToolCall,
    ToolName,
    WriteFileArgs,
    openai_tools,
    opening_messages,
    parse_tool_call,
    summary_repair_tools,
    system_prompt,
)

EXPECTED_ARGUMENTS = {
    "list_files": (["path"], []),
    "read_file": (["path"], []),
    "write_file": (["path", "content"], []),
    "replace_in_file": (["path", "old", "new"], []),
    "search": (["pattern"], ["path"]),
    "run": (["command"], []),
    "request_dependency": (["ecosystem", "name", "version", "reason"], []),
    "finish": (["summary"], []),
}


def test_the_eight_tools_have_exactly_the_contract_names_and_arguments() -> None:
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == list(EXPECTED_ARGUMENTS)
    for tool in tools:
        assert tool["type"] == "function"
        parameters = tool["function"]["parameters"]
        required, optional = EXPECTED_ARGUMENTS[tool["function"]["name"]]
        assert parameters["type"] == "object"
        assert parameters["additionalProperties"] is False
        assert parameters["required"] == required
        assert list(parameters["properties"]) == required + optional
        assert all(p["type"] == "string" for p in parameters["properties"].values())
        assert tool["function"]["description"]
    json.dumps(tools)  # the request body is JSON


def test_summary_repair_offers_finish_only() -> None:
    assert [t["function"]["name"] for t in summary_repair_tools()] == ["finish"]


def test_a_valid_call_parses_into_its_typed_arguments() -> None:
    call = parse_tool_call("c1", "write_file", '{"path": "a.py", "content": "x = 1\\n"}')
    expected = WriteFileArgs(path="a.py", content="x = 1\n")
    assert call == ToolCall("c1", ToolName.write_file, expected)


def test_an_optional_argument_may_be_left_out_or_null() -> None:
    for arguments in ('{"pattern": "def"}', '{"pattern": "def", "path": null}'):
        call = parse_tool_call("c", "search", arguments)
        assert isinstance(call, ToolCall)
        assert call.arguments == SearchArgs(pattern="def")


def test_an_unknown_tool_is_told_the_tools_there_are() -> None:
    problem = parse_tool_call("c", "delete_file", '{"path": "a"}')
    assert problem == CallProblem(
        "c", "delete_file", "unknown tool 'delete_file'; the tools are: " + ", ".join(ALL_TOOLS)
    )


def test_a_tool_not_offered_is_unknown_during_summary_repair() -> None:
    problem = parse_tool_call("c", "write_file", '{"path": "a", "content": ""}', [ToolName.finish])
    assert isinstance(problem, CallProblem)
    assert problem.message == "unknown tool 'write_file'; the tools are: finish"


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ('{"path": "a"}', "'content': is required"),
        ('{"path": "a", "content": 3}', "'content': must be text"),
        ('{"path": "a", "content": "", "mode": "w"}', "'mode': is not an argument of this tool"),
        ('{"path": "", "content": ""}', "'path': must not be empty"),
        ('{"path": "a", "content": ', "the arguments are not valid JSON"),
        ('["a", "b"]', "the arguments must be a JSON object"),
    ],
)
def test_bad_arguments_say_what_is_wrong(arguments: str, says: str) -> None:
    problem = parse_tool_call("c", "write_file", arguments)
    assert isinstance(problem, CallProblem)
    assert problem.message.startswith("bad arguments for write_file: ")
    assert says in problem.message


def test_bad_arguments_never_echo_the_content_back() -> None:
    content = "password = hunter2-" + "x" * 5000
    problem = parse_tool_call("c", "write_file", json.dumps({"path": 7, "content": content}))
    assert isinstance(problem, CallProblem)
    assert "hunter2" not in problem.message
    assert len(problem.message) < 200


def test_a_secret_shaped_tool_name_is_masked_in_the_message() -> None:
    token = "ghp_" + "a" * 36
    problem = parse_tool_call("c", token, "{}")
    assert isinstance(problem, CallProblem)
    assert token not in problem.message


def test_empty_arguments_text_is_the_empty_object() -> None:
    problem = parse_tool_call("c", "finish", "")
    assert isinstance(problem, CallProblem)
    assert "'summary': is required" in problem.message


def test_an_empty_summary_parses_so_the_loop_can_repair_it() -> None:
    call = parse_tool_call("c", "finish", '{"summary": ""}')
    assert isinstance(call, ToolCall)
    assert call.arguments == FinishArgs(summary="")


def test_a_call_renders_back_as_an_openai_tool_call() -> None:
    call = parse_tool_call("c9", "search", {"pattern": "TODO"})
    assert isinstance(call, ToolCall)
    rendered = call.to_openai()
    assert rendered == {
        "id": "c9",
        "type": "function",
        "function": {"name": "search", "arguments": '{"pattern": "TODO"}'},
    }
    function = rendered["function"]
    assert parse_tool_call("c9", function["name"], function["arguments"]) == call


@dataclass(frozen=True)
class _Room:
    name: str = "web"
    base_branch: str = "main"
    verify_command: str | None = "make test"


@dataclass(frozen=True)
class _Request:
    text: str = "Add a health endpoint"
    kind: str = "interactive"


def test_the_system_prompt_says_the_job_the_tools_packages_and_finish() -> None:
    prompt = system_prompt(_Request(), _Room())
    assert "web" in prompt
    assert "main" in prompt
    assert "make test" in prompt
    assert all(tool.value in prompt for tool in ToolName)
    assert "request_dependency" in prompt
    assert "finish" in prompt.splitlines()[-1]


def test_the_system_prompt_masks_a_secret_in_the_room() -> None:
    token = "ghp_" + "b" * 36
    prompt = system_prompt(_Request(), _Room(verify_command=f"GITHUB_TOKEN={token} make"))
    assert token not in prompt


def test_a_scheduled_job_is_told_it_starts_fresh() -> None:
    assert "schedule" in system_prompt(_Request(kind="scheduled"), _Room())
    assert "schedule" not in system_prompt(_Request(), _Room())


def test_a_conversation_opens_with_the_system_prompt_then_the_request() -> None:
    messages = opening_messages(_Request(), _Room(verify_command=None))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "Add a health endpoint"
    assert "checks the work" not in messages[0]["content"]


def test_the_prompt_shows_each_tools_arguments() -> None:
    prompt = system_prompt(_Request(), _Room())
    assert "- write_file {path, content}: " in prompt
    assert "- search {pattern, path?}: " in prompt


def test_a_text_protocol_prompt_says_how_to_write_a_call() -> None:
    native = system_prompt(_Request(), _Room())
    text = system_prompt(_Request(), _Room(), text_protocol=True)
    assert "```json" not in native
    assert '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```' in text
    messages = opening_messages(_Request(), _Room(), text_protocol=True)
    assert messages[0]["content"] == text
