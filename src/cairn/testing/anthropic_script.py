"""The replies ScriptedAnthropicServer replays, and how they look on Anthropic's Messages wire.

A script is a list of `Reply`s per conversation. A reply is text, `tool_use` blocks, or both;
any of them may carry a `Fault` (shared with the chat-completions fakes) instead of, or part
way through, its delivery. Streaming follows Anthropic's event order exactly: message_start,
then per block content_block_start / content_block_delta (text_delta, input_json_delta) /
content_block_stop, then message_delta (stop_reason, usage) and message_stop.

Token counts are the same deterministic estimate as the chat-completions fakes use (about four
characters a token), so tests can predict the usage a CLI reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.testing.openai_script import Fault, estimate_tokens

TEXT_PIECE = 16
JSON_PIECE = 12


@dataclass(frozen=True)
class ToolUse:
    """One `tool_use` block: the tool's name and its input (an object)."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None  # None: the server gives a deterministic `toolu_...` id


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one `POST /v1/messages` of a conversation."""

    text: str = ""
    tool_uses: tuple[ToolUse, ...] = ()
    stop_reason: str | None = None  # None: tool_use when there are tool uses, else end_turn
    fault: Fault | None = None
    after_events: int = 0  # for Fault.drop_connection on a stream: events sent before the drop

    @property
    def reason(self) -> str:
        """The stop reason this reply reports when nothing goes wrong."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_uses else "end_turn"

    def with_fault(self, fault: Fault, *, after_events: int = 0) -> Reply:
        """This reply, delivered with `fault`."""
        return replace(self, fault=fault, after_events=after_events)


def text_reply(text: str, *, stop_reason: str | None = None) -> Reply:
    """A reply that is plain text (stop_reason `end_turn` unless given, e.g. `max_tokens`)."""
    return Reply(text=text, stop_reason=stop_reason)


def tool_use_reply(*uses: ToolUse, text: str = "") -> Reply:
    """A reply carrying `tool_use` blocks (several: parallel tool use)."""
    if not uses:
        raise ValueError("tool_use_reply needs at least one ToolUse")
    return Reply(text=text, tool_uses=uses)


def fault_reply(fault: Fault, *, after_events: int = 0) -> Reply:
    """A reply that is only a fault (a hang, an HTTP 500, a dropped connection)."""
    return Reply(fault=fault, after_events=after_events)


def input_tokens(body: Mapping[str, Any]) -> int:
    """The estimated input tokens of a request: its system, messages and tools as JSON."""
    parts = [body.get("system") or "", body.get("messages") or [], body.get("tools") or []]
    return sum(estimate_tokens(json.dumps(part, separators=(",", ":"))) for part in parts)


def output_tokens(reply: Reply) -> int:
    """The estimated output tokens of a reply: its text, tool names and inputs."""
    uses = sum(
        estimate_tokens(use.name) + estimate_tokens(json.dumps(dict(use.input)))
        for use in reply.tool_uses
    )
    return estimate_tokens(reply.text) + uses


def content_blocks(reply: Reply, tool_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The reply's content as Messages API blocks."""
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for use, use_id in zip(reply.tool_uses, tool_ids, strict=True):
        blocks.append(
            {"type": "tool_use", "id": use_id, "name": use.name, "input": dict(use.input)}
        )
    return blocks


def message_object(
    reply: Reply, *, message_id: str, model: str, tool_ids: Sequence[str], used_input: int
) -> dict[str, Any]:
    """The whole non-streaming `message` object for `reply`."""
    reason = None if reply.fault is Fault.no_finish_reason else reply.reason
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content_blocks(reply, tool_ids),
        "stop_reason": reason,
        "stop_sequence": None,
        "usage": {"input_tokens": used_input, "output_tokens": output_tokens(reply)},
    }


def stream_events(
    reply: Reply, *, message_id: str, model: str, tool_ids: Sequence[str], used_input: int
) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of a streamed `reply`, in Anthropic's order."""
    start = message_object(
        Reply(), message_id=message_id, model=model, tool_ids=(), used_input=used_input
    )
    start["stop_reason"] = None
    start["usage"] = {"input_tokens": used_input, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(content_blocks(reply, tool_ids)):
        events += _block_events(index, block)
    if reply.fault is Fault.no_finish_reason:
        return events
    delta = {"stop_reason": reply.reason, "stop_sequence": None}
    usage = {"output_tokens": output_tokens(reply)}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def request_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Every text a request's messages carry (text blocks, tool results), joined."""
    return "\n".join(_text_of(message.get("content")) for message in messages)


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the first user message: where a CLI puts the prompt that names a job."""
    users = [m for m in messages if m.get("role") == "user"]
    return _text_of(users[0].get("content")) if users else ""


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            texts.append(_text_of(block.get("content")))
    return "\n".join(texts)


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if block["type"] == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], TEXT_PIECE)]
    else:
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, JSON_PIECE)]
    start = {"type": "content_block_start", "index": index, "content_block": opening}
    events = [("content_block_start", start)]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]
