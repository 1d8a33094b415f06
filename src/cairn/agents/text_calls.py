"""Tool calls written as JSON in a model's text, for servers and models without native calls.

Many local models (small Qwen coders under llama.cpp or Ollama, for one) answer with the call
in the message text and leave `tool_calls` empty. Accepted, and only these:
- fenced blocks (```` ```json ````, ```` ``` ````, ```` ```tool_call ````) holding JSON;
- `<tool_call>...</tool_call>` tags (the format Qwen's own chat template teaches);
- an answer that starts with JSON (one or more values, or an array of calls), prose after.
Each JSON object must have a call's shape: `{"name", "arguments"}`, `{"tool", "parameters"}`,
`{"function": {"name", "arguments"}}` or `{"tool_calls": [...]}`. JSON inside prose, outside
a fence or tag, is never a call: a model explaining a format is not calling a tool. The calls
are all or nothing: one bad call sends the whole answer back with one short correction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cairn.agents.model_tools import ALL_TOOLS, CallProblem, ToolCall, ToolName, parse_tool_call

_FENCE = re.compile(r"```[ \t]*(?P<lang>[A-Za-z0-9_-]*)[ \t]*\r?\n?")
_FENCE_LANGUAGES = frozenset({"", "json", "tool_call", "tool"})
_TAG, _END_TAG = "<tool_call>", "</tool_call>"

# The keys a call object may carry besides its name and arguments (an OpenAI-style echo).
_EXTRA_KEYS = frozenset({"id", "type"})
_NAME_KEYS = ("name", "tool", "tool_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args")


class Wrapping(StrEnum):
    fenced = "fenced"
    """Each call in its own ```` ```json ```` block."""
    tagged = "tagged"
    """Each call inside `<tool_call>` tags."""
    bare = "bare"
    """The whole answer is the JSON: one object, or an array of several."""


class CallShape(StrEnum):
    name_arguments = "name_arguments"
    """`{"name": ..., "arguments": {...}}`"""
    tool_parameters = "tool_parameters"
    """`{"tool": ..., "parameters": {...}}`"""
    function = "function"
    """`{"type": "function", "function": {"name": ..., "arguments": "<JSON text>"}}`"""


@dataclass(frozen=True)
class TextCalls:
    """What a text answer holds: its calls, or None and the correction to send back once."""

    calls: tuple[ToolCall, ...] | None
    correction: str | None = None


def parse_text_calls(
    text: str, offered: Sequence[ToolName] = ALL_TOOLS, *, id_prefix: str = "text-call"
) -> TextCalls:
    """The tool calls written in `text`, or None plus one short correction for the model.

    Call ids are `{id_prefix}-{n}` in order, so the same answer always gives the same ids.
    """
    values, invalid = _json_values(text)
    found: list[tuple[str, object]] = []
    for value in values:
        found.extend(_calls_in(value))
    if not found:
        return TextCalls(None, _correction(offered, invalid))
    calls: list[ToolCall] = []
    for index, (name, arguments) in enumerate(found):
        call_id = f"{id_prefix}-{index}"
        parsed = parse_tool_call(call_id, name, arguments, offered)
        if isinstance(parsed, CallProblem):
            return TextCalls(None, f"{parsed.message}. {_HOW}")
        calls.append(parsed)
    return TextCalls(tuple(calls))


_HOW = 'Write each tool call as one JSON object with "name" and "arguments".'


def _correction(offered: Sequence[ToolName], invalid: str | None) -> str:
    names = ", ".join(tool.value for tool in offered)
    if invalid is not None:
        return f"The tool call in your answer is not valid JSON ({invalid}). {_HOW}"
    example = '{"name": "finish", "arguments": {"summary": "..."}}'
    return (
        "Your answer held no tool call. Answer with a tool call as JSON in a ```json block, "
        f"for example {example}. The tools are: {names}."
    )


def _json_values(text: str) -> tuple[list[object], str | None]:
    """The JSON values of every accepted wrapping, and why a would-be call did not decode."""
    values: list[object] = []
    invalid: list[str] = []
    stripped = text.strip()
    # An answer that starts with JSON is bare, whatever fences its strings hold.
    bare = stripped.startswith(("{", "["))
    if bare and _decode_into(stripped, 0, None, values, invalid) is not None:
        return values, None
    _fenced(text, values, invalid)
    _tagged(text, values, invalid)
    return values, invalid[0] if invalid else None


def _fenced(text: str, values: list[object], invalid: list[str]) -> None:
    """Decode the JSON of each fence of `text` into `values`; a fence of prose is skipped."""
    position = 0
    while (opener := _FENCE.search(text, position)) is not None:
        end = None
        if opener["lang"].lower() in _FENCE_LANGUAGES:
            end = _decode_into(text, opener.end(), "```", values, invalid)
        if end is None:  # not JSON: skip the block's body to its closing fence
            close = text.find("```", opener.end())
            end = len(text) if close < 0 else close
        position = end + 3


def _tagged(text: str, values: list[object], invalid: list[str]) -> None:
    """Decode the JSON of each `<tool_call>` tag of `text` into `values`."""
    position = 0
    while (start := text.find(_TAG, position)) >= 0:
        end = _decode_into(text, start + len(_TAG), _END_TAG, values, invalid)
        position = start + len(_TAG) if end is None else end + len(_END_TAG)


def _decode_into(
    text: str, position: int, closer: str | None, values: list[object], invalid: list[str]
) -> int | None:
    """Decode JSON values from `position` up to `closer` (or the end); None if not all JSON.

    Decoding value by value, rather than cutting at the first closer, keeps a closer inside a
    JSON string (a README's own fences in `write_file` content) from ending the block.
    """
    decoded: list[object] = []
    decoder = json.JSONDecoder()
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text) or (closer and text.startswith(closer, position)):
            values.extend(decoded)
            return position
        if text[position] not in "{[":
            if closer is None and decoded:  # a bare answer may end with a line of prose
                values.extend(decoded)
                return position
            return None  # prose or code, not a call
        try:
            value, position = decoder.raw_decode(text, position)
        except ValueError as error:  # JSONDecodeError is one
            invalid.append(_reason(error))
            return None
        except RecursionError:  # nested deeper than the decoder's stack: not a call
            invalid.append("nested too deeply")
            return None
        decoded.append(value)


def _reason(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at line {error.lineno}, column {error.colno}"
    return "not JSON"


def _calls_in(value: object) -> Iterator[tuple[str, object]]:
    """(name, arguments) of each call-shaped object in a decoded value; others are skipped."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                yield from _calls_in(item)
        return
    if not isinstance(value, dict):
        return
    if set(value) == {"tool_calls"} and isinstance(value["tool_calls"], list):
        yield from _calls_in(value["tool_calls"])
        return
    inner = value.get("function")
    if isinstance(inner, dict) and set(value) - _EXTRA_KEYS == {"function"}:
        value = inner
    call = _name_and_arguments(value)
    if call is not None:
        yield call


def _name_and_arguments(value: dict[str, Any]) -> tuple[str, object] | None:
    names = [key for key in _NAME_KEYS if key in value]
    arguments = [key for key in _ARGUMENT_KEYS if key in value]
    if len(names) != 1 or len(arguments) != 1:
        return None
    if set(value) - _EXTRA_KEYS != {names[0], arguments[0]} or not isinstance(value[names[0]], str):
        return None
    return value[names[0]], value[arguments[0]]


def render_text_calls(
    calls: Sequence[ToolCall],
    wrapping: Wrapping = Wrapping.fenced,
    shape: CallShape = CallShape.name_arguments,
) -> str:
    """`calls` written as a text-protocol model writes them; `parse_text_calls` reads them back."""
    objects = [_shaped(call, shape) for call in calls]
    if wrapping is Wrapping.bare:
        return json.dumps(objects[0] if len(objects) == 1 else objects, indent=2)
    if wrapping is Wrapping.tagged:
        return "\n".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>" for o in objects)
    return "\n\n".join(f"```json\n{json.dumps(o, indent=2)}\n```" for o in objects)


def _shaped(call: ToolCall, shape: CallShape) -> dict[str, Any]:
    arguments = call.arguments.model_dump(exclude_none=True)
    if shape is CallShape.tool_parameters:
        return {"tool": call.name.value, "parameters": arguments}
    if shape is CallShape.function:
        function = {"name": call.name.value, "arguments": json.dumps(arguments)}
        return {"type": "function", "function": function}
    return {"name": call.name.value, "arguments": arguments}


def as_text_protocol(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A native-form conversation as a server without tool calls accepts it.

    The conversation is stored (and fitted to its budget) in native form; only what is sent
    changes: an assistant's calls become its text, written as the model is asked to write
    them, and each tool result becomes a user message saying which call it answers.
    """
    names = {
        call["id"]: call["function"].get("name", "tool")
        for message in messages
        for call in message.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("function"), dict) and "id" in call
    }
    sent: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            head = f"Result of {names.get(call_id, 'tool')} (call {call_id}):"
            sent.append({"role": "user", "content": f"{head}\n{message.get('content') or ''}"})
        elif message.get("role") == "assistant" and message.get("tool_calls"):
            calls = [_text_call(call) for call in message["tool_calls"]]
            text = "\n\n".join([message.get("content") or "", *calls]).strip()
            sent.append({"role": "assistant", "content": text})
        else:
            sent.append(dict(message))
    return sent


def _text_call(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return ""
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError, RecursionError):
        arguments = function.get("arguments")
    shaped = {"name": function.get("name"), "arguments": arguments}
    return f"```json\n{json.dumps(shaped, indent=2)}\n```"
