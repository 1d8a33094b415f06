"""A job's saved conversation steps as chat messages, and the steps a fresh one opens with.

The steps are stored in the order things happened; the messages are in the order the chat
API demands: each assistant message is followed directly by the results of its calls (a
dependency decision that arrived days later is its call's result), then whatever cairn or a
person said since. A call that never got a result (the turn ended first) is answered "not run",
so the conversation stays one the API accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.agents.base import JobFacts
from cairn.agents.context_budget import TokenCounter, cut_latest_results, fit_context
from cairn.agents.model_tools import system_prompt
from cairn.agents.text_calls import as_text_protocol
from cairn.store.records import ContextStep, StepKind

Message = dict[str, Any]
Opening = list[tuple[StepKind, dict[str, Any]]]

REFERENCES_HEAD = (
    "Reference material (bounded; from the repository's documents and the previous "
    "scheduled run's result, never its conversation):"
)
NOT_RUN = "not run: the turn ended before this call"
# Tokens kept free beyond the estimate: a server's count of the framing may differ a little.
MARGIN_TOKENS = 32


class ContextTooBig(Exception):
    """What is always kept (system prompt, request, follow-ups, the latest step with its tool
    results cut) exceeds the budget; the message says what to change."""


@dataclass(frozen=True)
class _Request:
    kind: str
    text: str


@dataclass(frozen=True)
class _Room:
    name: str
    base_branch: str
    verify_command: str | None


def opening_steps(
    facts: JobFacts,
    text: str,
    references: str | None,
    *,
    text_protocol: bool,
    mask: Callable[[str], str],
) -> Opening:
    """A fresh conversation: the system prompt and one sanitized copy of the request (rule 1)."""
    room = _Room(facts.room or "this room", facts.base_branch, facts.verify_command)
    system = system_prompt(_Request(facts.kind, text), room, text_protocol=text_protocol)
    request: dict[str, Any] = {"content": mask(text)}
    if references:
        request["references"] = mask(references)
    return [(StepKind.system, {"content": mask(system)}), (StepKind.request, request)]


def messages_from_steps(steps: Sequence[ContextStep]) -> list[Message]:
    """The chat messages of `steps`, each assistant message followed by its calls' results."""
    results = {
        step.payload.get("call_id"): step for step in steps if step.kind is StepKind.tool_result
    }
    messages: list[Message] = []
    for step in steps:
        if step.kind is StepKind.assistant:
            messages.append(_assistant(step.payload))
            for call in _calls(step.payload):
                result = results.get(call["id"])
                content = str(result.payload.get("content", "")) if result else NOT_RUN
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        elif step.kind is StepKind.system:
            messages.append({"role": "system", "content": str(step.payload.get("content", ""))})
        elif step.kind is not StepKind.tool_result:
            messages.append({"role": "user", "content": _user_text(step)})
    return messages


def _user_text(step: ContextStep) -> str:
    content = str(step.payload.get("content", ""))
    references = step.payload.get("references")
    if step.kind is StepKind.request and references:
        return f"{content}\n\n{REFERENCES_HEAD}\n{references}"
    return content


def _assistant(payload: dict[str, Any]) -> Message:
    calls = _calls(payload)
    message: Message = {"role": "assistant", "content": payload.get("content") or ""}
    if calls:
        message["content"] = payload.get("content")  # None beside calls, as the API sends it
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
    return message


def _calls(payload: dict[str, Any]) -> list[dict[str, str]]:
    calls = payload.get("tool_calls")
    if not isinstance(calls, list):
        return []
    found: list[dict[str, str]] = []
    for c in calls:
        if not isinstance(c, dict):
            continue
        call = {key: str(c.get(key)) for key in ("id", "name", "arguments")}
        # Why a saved call may not run as saved: its arguments were cut, or they were masked.
        call.update({key: str(c[key]) for key in ("problem", "masked") if c.get(key)})
        found.append(call)
    return found


def calls_of(step: ContextStep) -> list[dict[str, str]]:
    """The tool calls an assistant step saved: `{"id", "name", "arguments"}` each, with
    `problem` when the arguments were too big to keep and `masked` when masking changed them."""
    return _calls(step.payload) if step.kind is StepKind.assistant else []


def answered_ids(steps: Sequence[ContextStep]) -> set[str]:
    """The ids of every call that has a saved result."""
    return {str(step.payload.get("call_id")) for step in steps if step.kind is StepKind.tool_result}


def messages_within(
    steps: Sequence[ContextStep],
    budget: int,
    counter: TokenCounter,
    *,
    tools: list[dict[str, Any]] | None,
    text_protocol: bool,
) -> list[Message]:
    """The messages to send for `steps`, within `budget` tokens together with `tools`.

    Fitted in native form (so tool results stay elidable), then written as the text
    protocol when the model calls tools in text; a text form that came out larger is
    fitted again to a budget that much smaller.
    """
    left = budget - MARGIN_TOKENS - (counter.count({"tools": tools}) if tools else 0)
    messages = messages_from_steps(steps)
    # The latest two steps are kept whole when they fit, else only the latest one, else the
    # latest one with its tool results cut to the room left (one huge result is no dead end).
    for keep in (2, 2, 1, 1, 0, 0):
        if keep == 0:
            messages = cut_latest_results(messages, left, counter)
        fitted = fit_context(messages, left, counter, keep_steps=max(keep, 1))
        sent = as_text_protocol(fitted.messages) if text_protocol else fitted.messages
        over = counter.total(sent) - (left + MARGIN_TOKENS // 2)
        if fitted.fits and over <= 0:
            return sent
        if fitted.fits:
            left -= over
    raise ContextTooBig(
        "the conversation's kept part (system prompt, request, follow-ups and the latest "
        f"step) is larger than context_tokens ({budget}); give the agent a larger "
        "--context-tokens"
    )
