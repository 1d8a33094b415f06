"""The answers ScriptedOpenAIServer replays, and how they look on the wire.

A script is a list of `Answer`s per conversation. An answer is a text, a list of native tool
calls, or a tool call written as (fenced) JSON in the text, for models without native tool
calls; any of them may carry a `Fault` instead of, or part way through, its delivery.

Token counts are a deterministic estimate (`estimate_tokens`: about four characters a token),
so tests can predict the `usage` the server reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

# A fixed creation time: answers are the same bytes in every run.
CREATED = 1_700_000_000
# Real servers send a token or a few per chunk; small pieces make every call span chunks.
TEXT_PIECE = 16
ARGUMENTS_PIECE = 8


class FinishReason(StrEnum):
    """Why the model stopped, as chat completions report it."""

    stop = "stop"  # a complete text answer
    tool_calls = "tool_calls"  # the answer is one or more native tool calls
    length = "length"  # cut off at the token limit


class Fault(StrEnum):
    """A way an answer fails, as real servers and networks fail."""

    # Streaming: the socket closes after `after_chunks` events, mid chunked body.
    # Non-streaming: it closes before any byte of the response.
    drop_connection = "drop_connection"
    # The stream ends cleanly but never says why: no finish_reason, no `data: [DONE]`.
    # Non-streaming: a completion whose finish_reason is null.
    no_finish_reason = "no_finish_reason"
    hang = "hang"  # never answers; the request stays open until the server closes
    server_error = "server_error"  # HTTP 500
    rate_limited = "rate_limited"  # HTTP 429, with a short retry-after
    model_not_found = "model_not_found"  # HTTP 404: the server serves no such model


@dataclass(frozen=True)
class ToolCall:
    """One native tool call; `arguments` a mapping (sent as JSON) or raw, possibly bad, text."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None  # None: the server gives a deterministic id

    def arguments_json(self) -> str:
        """The arguments as the wire carries them: a JSON string."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments))


@dataclass(frozen=True)
class Answer:
    """One scripted model answer to one request of a conversation."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None  # None: tool_calls when there are calls, else stop
    fault: Fault | None = None
    after_chunks: int = 0  # for Fault.drop_connection on a stream: events sent before the drop

    @property
    def reason(self) -> FinishReason:
        """The finish reason this answer reports when nothing goes wrong."""
        if self.finish_reason is not None:
            return self.finish_reason
        return FinishReason.tool_calls if self.tool_calls else FinishReason.stop

    def with_fault(self, fault: Fault, *, after_chunks: int = 0) -> Answer:
        """This answer, delivered with `fault`."""
        return replace(self, fault=fault, after_chunks=after_chunks)


def text_answer(text: str, *, finish_reason: FinishReason | None = None) -> Answer:
    """An answer that is plain text (finish_reason `stop` unless given, e.g. `length`)."""
    return Answer(text=text, finish_reason=finish_reason)


def tool_call_answer(*calls: ToolCall, text: str = "") -> Answer:
    """An answer carrying native tool calls (several: parallel tool calls)."""
    if not calls:
        raise ValueError("tool_call_answer needs at least one ToolCall")
    return Answer(text=text, tool_calls=calls)


def json_call_answer(
    name: str, arguments: Mapping[str, Any], *, fenced: bool = True, preface: str = ""
) -> Answer:
    """A tool call written as JSON in the text, as models without native tool calls answer."""
    payload = json.dumps({"name": name, "arguments": dict(arguments)}, indent=2)
    body = f"```json\n{payload}\n```" if fenced else payload
    return Answer(text=f"{preface}\n\n{body}" if preface else body)


def fault_answer(fault: Fault, *, after_chunks: int = 0) -> Answer:
    """An answer that is only a fault (a hang, an HTTP 500, a dropped connection)."""
    return Answer(fault=fault, after_chunks=after_chunks)


def estimate_tokens(text: str) -> int:
    """The server's token estimate for `text`: about four characters a token, rounded up."""
    return (len(text) + 3) // 4


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The estimated prompt tokens of a request: its messages and tools as compact JSON."""
    tokens = estimate_tokens(_compact(body.get("messages", [])))
    if body.get("tools"):
        tokens += estimate_tokens(_compact(body["tools"]))
    return tokens


def completion_tokens(answer: Answer) -> int:
    """The estimated completion tokens of an answer: its text, call names and arguments."""
    calls = sum(
        estimate_tokens(call.name) + estimate_tokens(call.arguments_json())
        for call in answer.tool_calls
    )
    return estimate_tokens(answer.text) + calls


def usage(prompt: int, completion: int) -> dict[str, int]:
    """A chat completions `usage` object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_object(
    answer: Answer, *, completion_id: str, model: str, call_ids: Sequence[str], used: dict[str, int]
) -> dict[str, Any]:
    """The whole non-streaming `chat.completion` object for `answer`."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call, call_id in zip(answer.tool_calls, call_ids, strict=True)
        ]
    reason = None if answer.fault is Fault.no_finish_reason else answer.reason.value
    choice = {"index": 0, "message": message, "finish_reason": reason, "logprobs": None}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [choice],
        "usage": used,
    }


def stream_chunks(
    answer: Answer,
    *,
    completion_id: str,
    model: str,
    call_ids: Sequence[str],
    used: dict[str, int] | None,
) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` events of a streamed `answer`, `[DONE]` not included.

    `used` is the usage for the last chunk (when the request set stream_options.include_usage).
    """
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in _pieces(answer.text, TEXT_PIECE)]
    for index, (call, call_id) in enumerate(zip(answer.tool_calls, call_ids, strict=True)):
        deltas += _call_deltas(index, call, call_id)
    chunks = [_chunk(completion_id, model, delta, None) for delta in deltas]
    if answer.fault is Fault.no_finish_reason:
        return chunks
    chunks.append(_chunk(completion_id, model, {}, answer.reason.value))
    if used is not None:
        final = _chunk(completion_id, model, {}, None)
        final["choices"] = []
        final["usage"] = used
        chunks.append(final)
    return chunks


def conversation_head(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text that names a conversation: system/developer messages and the first user one."""
    head = [m for m in messages if m.get("role") in ("system", "developer")]
    users = [m for m in messages if m.get("role") == "user"]
    return "\n".join(content_text(m) for m in head + users[:1])


def conversation_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Every system, developer and user message's text: a conversation named anywhere in it."""
    kept = [m for m in messages if m.get("role") in ("system", "developer", "user")]
    return "\n".join(content_text(m) for m in kept)


def content_text(message: Mapping[str, Any]) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _call_deltas(index: int, call: ToolCall, call_id: str) -> list[dict[str, Any]]:
    """The deltas of one tool call: id and name first, then its arguments in pieces."""
    head = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    deltas: list[dict[str, Any]] = [{"tool_calls": [head]}]
    for piece in _pieces(call.arguments_json(), ARGUMENTS_PIECE):
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    return deltas


def _chunk(
    completion_id: str, model: str, delta: dict[str, Any], reason: str | None
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}],
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
