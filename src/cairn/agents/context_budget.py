"""Bounded context: the messages to send when the whole conversation would not fit.

The stored conversation stays whole; this chooses what one request carries. It works on
OpenAI-format messages (system, user, assistant with `tool_calls`, tool results) in three
layers, each tried only when the one before is not enough:
1. nothing changes when the conversation fits;
2. the oldest steps (an assistant message with the results of its calls) are stubbed, oldest
   first: a tool result becomes "[elided: read_file src/x.py, 4,210 characters]", long text
   inside the step's call arguments becomes "[elided: N characters]" (the arguments stay
   valid JSON: servers parse them for their chat templates);
3. still too big, those steps are dropped whole, oldest first.
Never touched: system and user messages (the prompt, the request, every follow-up) and the
latest `keep_steps` steps. A step is stubbed or dropped whole, so an assistant tool call is
never separated from its result (the API refuses a conversation where it is). Oldest first
and deterministic, the part sent stays a stable prefix from one request to the next.

Tokens are counted as characters of each message's compact JSON divided by a ratio: 4
characters per token until the server has answered, then the ratio its own reported usage
gives (`TokenCounter.calibrated`). The JSON keys make up for the per-message framing a chat
template adds, so the estimate errs on the large side.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cairn.sanitize import bound, mask_secret_shapes, strip_control

Message = dict[str, Any]

CHARS_PER_TOKEN = 4.0
"""The estimate before a server reports usage: about four characters per token."""
# A reported usage outside these bounds is a server's mistake, not a tokenizer.
_RATIO_BOUNDS = (1.0, 8.0)
# Text shorter than this is kept: its stub would save next to nothing.
_KEEP_CHARS = 200
_TARGET_CHARS = 60
_TARGET_KEYS = ("path", "command", "pattern", "name")


@dataclass(frozen=True)
class TokenCounter:
    """Counts a message's tokens from its characters, at a ratio known or estimated."""

    chars_per_token: float = CHARS_PER_TOKEN

    @classmethod
    def calibrated(cls, sent: Sequence[Mapping[str, Any]], prompt_tokens: int) -> TokenCounter:
        """The counter matching a server's reported `prompt_tokens` for the messages `sent`."""
        chars = sum(_chars(message) for message in sent)
        if prompt_tokens <= 0 or chars <= 0:
            return cls()
        low, high = _RATIO_BOUNDS
        return cls(min(max(chars / prompt_tokens, low), high))

    def count(self, message: Mapping[str, Any]) -> int:
        """The tokens of one message."""
        return math.ceil(_chars(message) / self.chars_per_token)

    def total(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The tokens of a list of messages."""
        return sum(self.count(message) for message in messages)


@dataclass(frozen=True)
class FittedContext:
    """The messages to send, their counted tokens, and how many steps were cut down."""

    messages: list[Message]
    tokens: int
    stubbed_steps: int = 0
    dropped_steps: int = 0
    fits: bool = True
    """False when even the messages that are always kept exceed the budget."""


@dataclass
class _Step:
    indices: list[int] = field(default_factory=list)


def fit_context(
    messages: Sequence[Message],
    budget: int,
    counter: TokenCounter | None = None,
    *,
    keep_steps: int = 2,
) -> FittedContext:
    """The messages to send within `budget` tokens, older tool results stubbed or dropped."""
    counter = counter or TokenCounter()
    out = list(messages)
    sizes = [counter.count(message) for message in out]
    steps = _elidable_steps(out, keep_steps)
    calls = _calls_by_id(out)
    stubbed, total = 0, sum(sizes)
    while stubbed < len(steps) and total > budget:
        for index in steps[stubbed].indices:
            out[index] = _stubbed(out[index], calls)
            size = counter.count(out[index])
            total, sizes[index] = total - sizes[index] + size, size
        stubbed += 1
    dropped = 0
    while dropped < len(steps) and total > budget:
        total -= sum(sizes[index] for index in steps[dropped].indices)
        dropped += 1
    gone = {index for step in steps[:dropped] for index in step.indices}
    kept = [message for index, message in enumerate(out) if index not in gone]
    return FittedContext(kept, total, stubbed, dropped, total <= budget)


def _elidable_steps(messages: Sequence[Message], keep_steps: int) -> list[_Step]:
    """The steps that may be cut, oldest first: all but the latest `keep_steps`."""
    steps: list[_Step] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer", "user"):
            continue  # always kept
        # Tool results join the assistant message right before them; a stray one is its own.
        joins = role == "tool" and steps and steps[-1].indices[-1] == index - 1
        if joins and messages[steps[-1].indices[0]].get("role") == "assistant":
            steps[-1].indices.append(index)
        else:
            steps.append(_Step([index]))
    return steps[: max(0, len(steps) - keep_steps)]


def _calls_by_id(messages: Sequence[Message]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each tool call's (name, decoded arguments) by its id, to say what a stub stands for."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        for call in _tool_calls(message):
            function = call.get("function")
            if not isinstance(function, dict) or not isinstance(call.get("id"), str):
                continue
            name = function.get("name")
            calls[call["id"]] = (name if isinstance(name, str) else "tool", _decoded(function))
    return calls


def _stubbed(message: Message, calls: Mapping[str, tuple[str, dict[str, Any]]]) -> Message:
    """`message` with its long text replaced by a stub saying what was elided."""
    stubbed = dict(message)
    size = _text_size(message.get("content"))
    if message.get("role") == "tool":
        call = calls.get(str(message.get("tool_call_id")))
        stub = _stub(*call) if call else "[elided: tool result"
        stub += f", {size:,} characters]"
    else:
        stub = f"[elided: {message.get('role') or 'message'} text, {size:,} characters]"
    if size > max(_KEEP_CHARS, len(stub)):
        stubbed["content"] = stub
    if _tool_calls(message):
        stubbed["tool_calls"] = [_shortened_call(call) for call in _tool_calls(message)]
    return stubbed


def _stub(name: str, arguments: Mapping[str, Any]) -> str:
    target = next((arguments[k] for k in _TARGET_KEYS if isinstance(arguments.get(k), str)), "")
    shown = bound(mask_secret_shapes(strip_control(target)).replace("\n", " "), _TARGET_CHARS)
    name = bound(mask_secret_shapes(strip_control(name)), _TARGET_CHARS)
    return f"[elided: {name} {shown}" if shown else f"[elided: {name}"


def _shortened_call(call: Any) -> Any:
    """A tool call whose long argument values are stubs; it stays valid JSON."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    if len(function["arguments"]) <= _KEEP_CHARS:
        return call
    arguments = _decoded(function)
    if not arguments:
        shortened: dict[str, Any] = {"elided": f"{len(function['arguments']):,} characters"}
    else:
        shortened = {key: _shortened_value(value) for key, value in arguments.items()}
    text = json.dumps(shortened, ensure_ascii=False)
    if len(text) >= len(function["arguments"]):  # many short values: nothing to gain
        return call
    return {**call, "function": {**function, "arguments": text}}


def _shortened_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _KEEP_CHARS:
        return f"[elided: {len(value):,} characters]"
    if isinstance(value, str):
        return value
    text = json.dumps(value, ensure_ascii=False)
    return f"[elided: {len(text):,} characters]" if len(text) > _KEEP_CHARS else value


def _tool_calls(message: Mapping[str, Any]) -> list[Any]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def _decoded(function: Mapping[str, Any]) -> dict[str, Any]:
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError, RecursionError):
        return {}
    return arguments if isinstance(arguments, dict) else {}


def _text_size(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):  # content parts: count their text
        return sum(len(str(part.get("text", ""))) for part in content if isinstance(part, dict))
    return 0


def _chars(message: Mapping[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str))


def cut_latest_results(
    messages: Sequence[Message], budget: int, counter: TokenCounter | None = None
) -> list[Message]:
    """`messages` with the latest step's tool results cut to what `budget` leaves them.

    The last resort when the latest step alone does not fit: each of its results keeps its
    head and tail around a marker saying how much was elided, sharing the room that the
    kept messages (and the latest step's call) leave.
    """
    counter = counter or TokenCounter()
    out = list(messages)
    latest = _latest_results(out)
    if not latest:
        return out
    emptied = [{**m, "content": ""} if i in latest else m for i, m in enumerate(out)]
    floor = fit_context(emptied, budget, counter, keep_steps=1).tokens
    room = (budget - floor) * counter.chars_per_token / len(latest)
    for index in latest:
        content = out[index].get("content")
        if not isinstance(content, str):
            continue
        # As counted: JSON escapes (newlines, quotes) make it longer than the text.
        encoded = len(json.dumps(content, ensure_ascii=False))
        if encoded <= room:
            continue
        keep = max(0, int(room * len(content) / max(encoded, 1)) - len(_CUT.format(n=0)) - 16)
        out[index] = {**out[index], "content": _cut_middle(content, keep)}
    return out


_CUT = "\n[... {n:,} characters elided: only the start and end fit the context ...]\n"


def _cut_middle(text: str, keep: int) -> str:
    head = keep * 2 // 3
    tail = keep - head
    elided = len(text) - head - tail
    return text[:head] + _CUT.format(n=elided) + (text[len(text) - tail :] if tail else "")


def _latest_results(messages: Sequence[Message]) -> list[int]:
    """The indices of the tool results after the last assistant message."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [i for i in range(last + 1, len(messages)) if messages[i].get("role") == "tool"]
