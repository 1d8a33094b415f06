"""How ScriptedResponsesServer's answers look on the wire of OpenAI's Responses API.

The answers are the chat server's (`openai_script.Answer`: text, tool calls, a `Fault`), so
one script can drive either server. A `ToolCall` becomes a `function_call` output item; a
`CustomToolCall` (its `arguments` the raw input text) a `custom_tool_call`, the way Codex CLI's
freeform `apply_patch` tool is called. An answer cut off at the token limit
(`FinishReason.length`) ends `incomplete`, with `response.incomplete` instead of
`response.completed`.

Token counts use `openai_script.estimate_tokens`, so tests can predict the reported `usage`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.testing.openai_script import (
    ARGUMENTS_PIECE,
    CREATED,
    TEXT_PIECE,
    Answer,
    Fault,
    FinishReason,
    ToolCall,
    estimate_tokens,
)


@dataclass(frozen=True)
class CustomToolCall(ToolCall):
    """A call of a custom (freeform) tool: `arguments` is its raw input text, not JSON."""

    def __post_init__(self) -> None:
        if not isinstance(self.arguments, str):
            raise TypeError("a custom tool call's input is text; pass it as `arguments`")


@dataclass(frozen=True)
class NamespacedToolCall(ToolCall):
    """A call of a function inside a tool namespace: how Codex CLI offers MCP tools (the
    namespace `mcp__SERVER`, the tool's own name), checked with Codex CLI 0.171.0."""

    namespace: str = ""

    def __post_init__(self) -> None:
        if not self.namespace:
            raise ValueError("a namespaced tool call needs its namespace, like mcp__cairn")


Event = tuple[str, dict[str, Any]]
"""One server-sent event: its name (`event:`) and its JSON payload (`data:`)."""


def input_items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A request's input as a list of items (a bare string input is one user message)."""
    given = body.get("input")
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    return [item for item in given or [] if isinstance(item, dict)]


def item_text(item: Mapping[str, Any]) -> str:
    """The text of an input message item, whether its content is a string or parts."""
    content = item.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _is_message(item: Mapping[str, Any]) -> bool:
    return bool(item.get("type", "message") == "message")


def conversation_head(body: Mapping[str, Any]) -> str:
    """The text that names a conversation: instructions, system, developer and user messages.

    Every user message counts, not only the first: a coding CLI sends context of its own
    (Codex CLI: its environment and AGENTS.md) as user messages before the task.
    """
    instructions = body.get("instructions")
    head = [instructions] if isinstance(instructions, str) else []
    roles = ("system", "developer", "user")
    head += [item_text(i) for i in input_items(body) if _is_message(i) and i.get("role") in roles]
    return "\n".join(head)


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The estimated input tokens of a request: instructions, input and tools as compact JSON."""
    parts = [body.get("instructions") or "", input_items(body)]
    if body.get("tools"):
        parts.append(body["tools"])
    return sum(estimate_tokens(_compact(part)) for part in parts)


def completion_tokens(answer: Answer) -> int:
    """The estimated output tokens of an answer: its text, call names and arguments."""
    calls = sum(
        estimate_tokens(call.name) + estimate_tokens(call.arguments_json())
        for call in answer.tool_calls
    )
    return estimate_tokens(answer.text) + calls


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """A Responses API `usage` object."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


@dataclass(frozen=True)
class Ids:
    """The deterministic ids of one answer: the response's, its message's, and its calls'."""

    response: str
    message: str
    items: tuple[str, ...]  # one per tool call: the output item's id
    calls: tuple[str, ...]  # one per tool call: the call_id the client answers with


def output_items(answer: Answer, ids: Ids, *, status: str = "completed") -> list[dict[str, Any]]:
    """The answer's output items, complete: a message when it has text, then each call."""
    items: list[dict[str, Any]] = []
    if answer.text or not answer.tool_calls:
        items.append(_message(ids.message, answer.text, status))
    for call, item_id, call_id in zip(answer.tool_calls, ids.items, ids.calls, strict=True):
        items.append(_call_item(call, item_id, call_id, call.arguments_json(), status))
    return items


def response_object(
    body: Mapping[str, Any],
    answer: Answer,
    ids: Ids,
    *,
    status: str,
    output: list[dict[str, Any]],
    used: dict[str, Any] | None,
) -> dict[str, Any]:
    """A `response` object as the API returns it, echoing what the request asked for."""
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return {
        "id": ids.response,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": body.get("instructions"),
        "model": str(body.get("model", "")),
        "output": output,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": body.get("previous_response_id"),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": list(body.get("tools") or []),
        "store": bool(body.get("store", True)),
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "usage": used,
    }


def final_status(answer: Answer) -> str:
    """`completed`, or `incomplete` for an answer cut off at the token limit."""
    return "incomplete" if answer.reason is FinishReason.length else "completed"


def stream_events(
    body: Mapping[str, Any], answer: Answer, ids: Ids, used: dict[str, Any]
) -> list[Event]:
    """Every event of a streamed `answer`, in order, numbered by `sequence_number`.

    With `Fault.no_finish_reason` the stream stops before its terminal event, as a server
    that gives up without saying so.
    """
    start = response_object(body, answer, ids, status="in_progress", output=[], used=None)
    events: list[Event] = [("response.created", {"response": start})]
    events.append(("response.in_progress", {"response": start}))
    status = final_status(answer)
    output = output_items(answer, ids, status=status)
    for index, item in enumerate(output):
        events += _item_events(index, item)
    if answer.fault is not Fault.no_finish_reason:
        done = response_object(body, answer, ids, status=status, output=output, used=used)
        events.append((f"response.{status}", {"response": done}))
    return [
        (name, {"type": name, "sequence_number": number, **payload})
        for number, (name, payload) in enumerate(events)
    ]


def _item_events(index: int, item: dict[str, Any]) -> Iterator[Event]:
    """One output item's events: added, its content in pieces, done."""
    at = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield "response.output_item.added", {"output_index": index, "item": _emptied(item)}
        part = {"type": "output_text", "text": "", "annotations": []}
        yield "response.content_part.added", {**at, "content_index": 0, "part": part}
        for piece in _pieces(text, TEXT_PIECE):
            delta = {**at, "content_index": 0, "delta": piece, "logprobs": []}
            yield "response.output_text.delta", delta
        yield "response.output_text.done", {**at, "content_index": 0, "text": text, "logprobs": []}
        part = {"type": "output_text", "text": text, "annotations": []}
        yield "response.content_part.done", {**at, "content_index": 0, "part": part}
    else:
        if item["type"] == "custom_tool_call":
            field, kind = "input", "custom_tool_call_input"
        else:
            field, kind = "arguments", "function_call_arguments"
        yield "response.output_item.added", {"output_index": index, "item": _emptied(item)}
        for piece in _pieces(item[field], ARGUMENTS_PIECE):
            yield f"response.{kind}.delta", {**at, "delta": piece}
        yield f"response.{kind}.done", {**at, field: item[field]}
    yield "response.output_item.done", {"output_index": index, "item": item}


def _emptied(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as `output_item.added` shows it: in progress, nothing in it yet."""
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    field = "input" if item["type"] == "custom_tool_call" else "arguments"
    return {**item, "status": "in_progress", field: ""}


def _message(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _call_item(
    call: ToolCall, item_id: str, call_id: str, payload: str, status: str
) -> dict[str, Any]:
    if isinstance(call, CustomToolCall):
        kind, field = "custom_tool_call", "input"
    else:
        kind, field = "function_call", "arguments"
    item = {
        "id": item_id,
        "type": kind,
        "status": status,
        "call_id": call_id,
        "name": call.name,
        field: payload,
    }
    if isinstance(call, NamespacedToolCall):
        item["namespace"] = call.namespace
    return item


def codex_catalog_entry(slug: str, *, context_window: int = 128_000) -> dict[str, Any]:
    """A Codex CLI model catalog entry for a scripted model, so Codex offers it every tool.

    Without an entry for its model name Codex CLI falls back to metadata that has no
    `apply_patch` tool. Write `{"models": [entry]}` to a file named by `model_catalog_json`
    in its config.toml (as checked with Codex CLI 0.171.0), or serve it with the server's
    `codex_models`.
    """
    return {
        "slug": slug,
        "display_name": slug,
        "description": "a scripted model (cairn.testing)",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": [{"effort": "medium", "description": "medium"}],
        "shell_type": "shell_command",
        "visibility": "list",
        "minimal_client_version": [0, 1, 0],
        "supported_in_api": True,
        "priority": 1,
        "upgrade": None,
        "base_instructions": "You are a coding agent working in the user's repository.",
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": "freeform",  # apply_patch as a custom tool: CustomToolCall
        "truncation_policy": {"mode": "bytes", "limit": 10_000},
        "supports_parallel_tool_calls": False,
        "context_window": context_window,
        "experimental_supported_tools": [],
    }


def tool_outputs(body: Mapping[str, Any]) -> dict[str, str]:
    """What the client answered each tool call with: call_id -> output text."""
    found: dict[str, str] = {}
    for item in input_items(body):
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            found[str(item.get("call_id"))] = text
    return found


def tool_names(body: Mapping[str, Any]) -> list[str]:
    """The names of the tools a request offered (function and custom tools alike)."""
    tools: Sequence[Any] = body.get("tools") or []
    return [str(tool["name"]) for tool in tools if isinstance(tool, dict) and "name" in tool]


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
