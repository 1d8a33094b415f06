"""Tool calls written as JSON text: every accepted wrapping round-trips, prose is never a call."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.agents.model_tools import (
    FinishArgs,
    ListFilesArgs,
    ReadFileArgs,
    ReplaceInFileArgs,
    RequestDependencyArgs,
    RunArgs,
    SearchArgs,
    ToolArguments,
    ToolCall,
    ToolName,
    WriteFileArgs,
)
from cairn.agents.text_calls import (
    CallShape,
    TextCalls,
    Wrapping,
    as_text_protocol,
    parse_text_calls,
    render_text_calls,
)

_text = st.text(max_size=60)
_said = st.text(min_size=1, max_size=60)
_ARGUMENTS: dict[ToolName, st.SearchStrategy[ToolArguments]] = {
    ToolName.list_files: st.builds(ListFilesArgs, path=_text),
    ToolName.read_file: st.builds(ReadFileArgs, path=_said),
    ToolName.write_file: st.builds(WriteFileArgs, path=_said, content=st.text(max_size=300)),
    ToolName.replace_in_file: st.builds(ReplaceInFileArgs, path=_said, old=_said, new=_text),
    ToolName.search: st.builds(SearchArgs, pattern=_said, path=st.none() | _text),
    ToolName.run: st.builds(RunArgs, command=_said),
    ToolName.request_dependency: st.builds(
        RequestDependencyArgs, ecosystem=_said, name=_said, version=_said, reason=_said
    ),
    ToolName.finish: st.builds(FinishArgs, summary=_text),
}


@st.composite
def _calls(draw: st.DrawFn) -> tuple[ToolCall, ...]:
    names = draw(st.lists(st.sampled_from(list(ToolName)), min_size=1, max_size=3))
    return tuple(
        ToolCall(f"text-call-{i}", name, draw(_ARGUMENTS[name])) for i, name in enumerate(names)
    )


_PROSE = st.sampled_from(["", "I will do that now.\n\n", "Sure! Here is the call:\n"])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_calls(), st.sampled_from(list(Wrapping)), st.sampled_from(list(CallShape)), _PROSE)
def test_a_rendered_valid_call_round_trips_in_every_wrapping(
    calls: tuple[ToolCall, ...], wrapping: Wrapping, shape: CallShape, prose: str
) -> None:
    rendered = render_text_calls(calls, wrapping, shape)
    if wrapping is not Wrapping.bare:  # a bare answer is JSON first, by definition
        rendered = prose + rendered
    assert parse_text_calls(rendered) == TextCalls(calls)


@settings(max_examples=500)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text: str) -> None:
    result = parse_text_calls(text)
    assert (result.calls is None) == (result.correction is not None)


_FRAGMENTS = ["```json\n", "```", "\n", "{", "}", "[", "]", '"name"', ":", ",", '"run"', '"']
_FRAGMENTS += ['"arguments"', '{"command": "ls"}', "<tool_call>", "</tool_call>", "prose "]
_JSONISH = st.lists(st.sampled_from(_FRAGMENTS))


@settings(max_examples=500)
@given(_JSONISH.map("".join))
def test_json_shaped_fragments_never_raise(text: str) -> None:
    result = parse_text_calls(text)
    assert (result.calls is None) == (result.correction is not None)


def test_prose_that_mentions_json_is_not_a_call() -> None:
    text = 'To list files you would send {"name": "run", "arguments": {"command": "ls"}} to me.'
    result = parse_text_calls(text)
    assert result.calls is None
    assert result.correction is not None
    assert "no tool call" in result.correction


def test_a_fenced_json_that_is_not_call_shaped_is_not_a_call() -> None:
    text = 'Your package.json should read:\n```json\n{"name": "app", "version": "1.0.0"}\n```'
    assert parse_text_calls(text).calls is None


def test_a_code_fence_in_file_content_does_not_cut_the_block() -> None:
    content = "# Title\n\n```python\nprint('hi')\n```\n"
    call = ToolCall("text-call-0", ToolName.write_file, WriteFileArgs(path="R.md", content=content))
    rendered = render_text_calls([call])
    assert rendered.count("```") == 4
    assert parse_text_calls(rendered).calls == (call,)


def test_a_tag_without_its_closing_tag_at_the_end_is_a_call() -> None:
    text = '<tool_call>\n{"name": "finish", "arguments": {"summary": "done"}}'
    result = parse_text_calls(text)
    assert result.calls == (ToolCall("text-call-0", ToolName.finish, FinishArgs(summary="done")),)


def test_a_bare_call_followed_by_a_line_of_prose_is_a_call() -> None:
    text = '{"tool": "run", "parameters": {"command": "make"}}\nThat runs the build.'
    assert parse_text_calls(text).calls == (
        ToolCall("text-call-0", ToolName.run, RunArgs(command="make")),
    )


def test_an_openai_style_tool_calls_echo_is_read() -> None:
    call = {"id": "x", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    text = json.dumps({"tool_calls": [call]})
    result = parse_text_calls(text)
    assert result.correction is not None
    assert result.correction.startswith("bad arguments for read_file: 'path': is required")


def test_an_unknown_tool_gets_one_correction_naming_the_offered_tools() -> None:
    text = '```json\n{"name": "write_file", "arguments": {"path": "a", "content": "b"}}\n```'
    result = parse_text_calls(text, [ToolName.finish])
    assert result.calls is None
    assert result.correction is not None
    assert result.correction.startswith("unknown tool 'write_file'; the tools are: finish")


def test_one_bad_call_sends_back_the_whole_answer() -> None:
    good = '{"name": "run", "arguments": {"command": "ls"}}'
    bad = '{"name": "run", "arguments": {"command": ""}}'
    result = parse_text_calls(f"```json\n{good}\n```\n```json\n{bad}\n```")
    assert result.calls is None
    assert result.correction is not None
    assert "'command': must not be empty" in result.correction


def test_a_broken_json_call_is_told_it_is_not_valid_json() -> None:
    text = '```json\n{"name": "finish", "arguments": {"summary": "a "quoted" word"}}\n```'
    result = parse_text_calls(text)
    assert result.correction is not None
    assert result.correction.startswith("The tool call in your answer is not valid JSON (")


def test_ids_follow_the_given_prefix_in_order() -> None:
    call = '{"name": "run", "arguments": {"command": "%s"}}'
    text = f"[{call % 'a'}, {call % 'b'}]"
    result = parse_text_calls(text, id_prefix="step-4")
    assert result.calls is not None
    assert [c.id for c in result.calls] == ["step-4-0", "step-4-1"]


def test_a_native_conversation_is_sent_as_text_and_its_calls_read_back() -> None:
    call = ToolCall("c1", ToolName.run, RunArgs(command="make"))
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": "Building.", "tool_calls": [call.to_openai()]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit 0"},
    ]
    sent = as_text_protocol(messages)
    assert sent[:2] == messages[:2]
    assert sent[2]["role"] == "assistant"
    assert sent[2]["content"].startswith("Building.\n\n```json\n")
    assert "tool_calls" not in sent[2]
    parsed = parse_text_calls(sent[2]["content"], id_prefix="c")
    assert parsed.calls == (ToolCall("c-0", ToolName.run, RunArgs(command="make")),)
    assert sent[3] == {"role": "user", "content": "Result of run (call c1):\nexit 0"}
    assert messages[2]["tool_calls"]  # the stored form is untouched


def test_a_bare_call_whose_content_holds_fences_and_tags_is_one_call() -> None:
    content = '```{"name": "run", "arguments": {"command": "rm"}}```\n<tool_call>[]</tool_call>'
    call = ToolCall("text-call-0", ToolName.write_file, WriteFileArgs(path="a", content=content))
    for wrapping in Wrapping:
        assert parse_text_calls(render_text_calls([call], wrapping)).calls == (call,)
