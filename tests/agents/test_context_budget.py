"""Bounded context: what is sent fits the budget, keeps what must be kept, pairs every call."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.agents.context_budget import (
    CHARS_PER_TOKEN,
    TokenCounter,
    cut_latest_results,
    fit_context,
)

Message = dict[str, Any]
_TOOLS = ["read_file", "run", "search", "write_file", "list_files"]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


def _step(index: int, name: str, argument: str, result: str) -> list[Message]:
    key = {"run": "command", "search": "pattern"}.get(name, "path")
    call = _call(f"call-{index}", name, {key: argument})
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call-{index}", "content": result},
    ]


_SYSTEM = {"role": "system", "content": "You are a coding agent."}
_REQUEST = {"role": "user", "content": "Add a health endpoint."}


@st.composite
def _unit(draw: st.DrawFn, index: int) -> tuple[str, list[Message]]:
    kind = draw(st.sampled_from(["step", "step", "step", "text", "follow_up", "parallel"]))
    size = st.integers(0, 3000)
    if kind == "follow_up":
        return kind, [{"role": "user", "content": "Also " + "x" * draw(st.integers(0, 400))}]
    if kind == "text":
        return kind, [{"role": "assistant", "content": "thinking " * draw(st.integers(0, 300))}]
    if kind == "step":
        name = draw(st.sampled_from(_TOOLS))
        return kind, _step(index, name, draw(st.text(max_size=30)), "r" * draw(size))
    ids = [f"call-{index}-{n}" for n in range(draw(st.integers(1, 3)))]
    calls = [_call(i, "write_file", {"path": i, "content": "w" * draw(size)}) for i in ids]
    results = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids]
    return kind, [{"role": "assistant", "content": "Writing.", "tool_calls": calls}, *results]


@st.composite
def _conversations(draw: st.DrawFn) -> list[tuple[str, list[Message]]]:
    count = draw(st.integers(0, 12))
    return [("opening", [_SYSTEM, _REQUEST]), *(draw(_unit(i)) for i in range(count))]


def _flat(units: list[tuple[str, list[Message]]]) -> list[Message]:
    return [message for _, messages in units for message in messages]


def _protected(units: list[tuple[str, list[Message]]], keep_steps: int) -> list[Message]:
    steps = [i for i, (kind, _) in enumerate(units) if kind not in ("opening", "follow_up")]
    latest = set(steps[max(0, len(steps) - keep_steps) :])
    return _flat([u for i, u in enumerate(units) if i not in steps or i in latest])


def _pairing_problems(messages: list[Message]) -> list[str]:
    problems, waiting = [], []
    for message in messages:
        if message["role"] == "tool":
            if not waiting or waiting.pop(0) != message["tool_call_id"]:
                problems.append(f"tool result {message['tool_call_id']} without its call")
            continue
        if waiting:
            problems.append(f"calls {waiting} without results")
        waiting = [call["id"] for call in message.get("tool_calls") or []]
    return problems + ([f"calls {waiting} without results"] if waiting else [])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_conversations(), st.integers(0, 12_000), st.integers(0, 3), st.floats(1.0, 8.0))
def test_the_context_fits_keeps_what_it_must_and_pairs_every_call(
    units: list[tuple[str, list[Message]]], budget: int, keep_steps: int, ratio: float
) -> None:
    messages, counter = _flat(units), TokenCounter(ratio)
    fitted = fit_context(messages, budget, counter, keep_steps=keep_steps)
    protected = _protected(units, keep_steps)
    assert fitted.tokens == counter.total(fitted.messages)
    assert fitted.fits == (fitted.tokens <= budget)
    if counter.total(protected) <= budget:
        assert fitted.fits
    if counter.total(messages) <= budget:
        assert fitted.messages == messages
    kept = iter(fitted.messages)
    assert all(any(m is k or m == k for k in kept) for m in protected), "in order, unchanged"
    assert _pairing_problems(fitted.messages) == []
    for sent in fitted.messages:
        json.loads(json.dumps(sent))
        for call in sent.get("tool_calls") or []:
            json.loads(call["function"]["arguments"])  # servers parse the arguments


def _long_conversation() -> list[Message]:
    messages = [_SYSTEM, _REQUEST]
    for index in range(6):
        messages += _step(index, "read_file", f"src/x{index}.py", "x" * 4210)
    return messages


def test_an_old_tool_result_becomes_a_stub_that_says_what_was_elided() -> None:
    messages = _long_conversation()
    fitted = fit_context(messages, TokenCounter().total(messages) - 100)
    assert fitted.stubbed_steps == 1
    assert fitted.dropped_steps == 0
    assert fitted.messages[3] == {
        "role": "tool",
        "tool_call_id": "call-0",
        "content": "[elided: read_file src/x0.py, 4,210 characters]",
    }
    assert fitted.messages[4:] == messages[4:]


def test_a_command_is_named_in_its_stub() -> None:
    messages = [
        _SYSTEM,
        _REQUEST,
        *_step(0, "run", "make test", "o" * 900),
        *_step(1, "run", "ls", ""),
    ]
    fitted = fit_context(messages, TokenCounter().total(messages) - 100, keep_steps=1)
    assert fitted.messages[3]["content"] == "[elided: run make test, 900 characters]"


def test_long_call_arguments_are_shortened_and_stay_valid_json() -> None:
    write = _call("w", "write_file", {"path": "a.py", "content": "y" * 5000})
    messages = [
        _SYSTEM,
        _REQUEST,
        {"role": "assistant", "content": None, "tool_calls": [write]},
        {"role": "tool", "tool_call_id": "w", "content": "written"},
        *_step(1, "read_file", "a.py", "short"),
    ]
    fitted = fit_context(messages, 200, keep_steps=1)
    arguments = json.loads(fitted.messages[2]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"path": "a.py", "content": "[elided: 5,000 characters]"}
    assert fitted.fits


def test_steps_are_dropped_whole_when_stubs_are_not_enough() -> None:
    messages = _long_conversation()
    fitted = fit_context(messages, TokenCounter().total([_SYSTEM, _REQUEST, *messages[-4:]]))
    assert fitted.fits
    assert fitted.messages == [_SYSTEM, _REQUEST, *messages[-4:]]
    assert fitted.dropped_steps == 4


def test_follow_ups_are_kept_even_when_the_budget_cannot_be_met() -> None:
    follow_up = {"role": "user", "content": "Please also " + "z" * 2000}
    messages = [*_long_conversation()[:4], follow_up, *_step(9, "run", "ls", "a")]
    fitted = fit_context(messages, 10, keep_steps=1)
    assert not fitted.fits
    assert fitted.messages == [_SYSTEM, _REQUEST, follow_up, *messages[-2:]]


def test_a_stray_tool_result_is_its_own_step() -> None:
    stray = {"role": "tool", "tool_call_id": "lost", "content": "q" * 1000}
    messages = [_SYSTEM, _REQUEST, stray, *_step(0, "run", "ls", "")]
    fitted = fit_context(messages, TokenCounter().total(messages) - 100, keep_steps=1)
    assert fitted.messages[2]["content"] == "[elided: tool result, 1,000 characters]"


def test_the_estimate_is_four_characters_a_token_until_usage_is_known() -> None:
    message = {"role": "user", "content": "a" * 100}
    compact = len(json.dumps(message, separators=(",", ":")))
    assert CHARS_PER_TOKEN == 4.0
    assert TokenCounter().count(message) == -(-compact // 4)


def test_reported_usage_calibrates_the_ratio() -> None:
    sent = [{"role": "user", "content": "a" * 1000}]
    chars = len(json.dumps(sent[0], separators=(",", ":")))
    counter = TokenCounter.calibrated(sent, prompt_tokens=chars // 2)
    assert counter.chars_per_token == chars / (chars // 2)
    assert counter.total(sent) == chars // 2


def test_a_nonsense_usage_falls_back_or_is_bounded() -> None:
    sent = [{"role": "user", "content": "a" * 1000}]
    assert TokenCounter.calibrated(sent, 0) == TokenCounter()
    assert TokenCounter.calibrated(sent, 1).chars_per_token == 8.0
    assert TokenCounter.calibrated(sent, 10**9).chars_per_token == 1.0


def test_the_latest_results_are_cut_to_their_head_and_tail_to_fit_the_room_left() -> None:
    big = "start of the output\n" + "middle line\n" * 3_000 + "end of the output\n"
    call = {"id": "c", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "you are a coding agent"},
        {"role": "user", "content": "do the thing"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": big},
    ]
    counter = TokenCounter()
    assert not fit_context(messages, 1_000, counter, keep_steps=1).fits
    cut = cut_latest_results(messages, 1_000, counter)
    assert fit_context(cut, 1_000, counter, keep_steps=1).fits
    result = cut[-1]["content"]
    assert result.startswith("start of the output") and result.endswith("end of the output\n")
    assert "characters elided" in result
    assert cut[:3] == messages[:3], "only the latest step's results are cut"
    assert cut_latest_results(messages, 100_000, counter) == messages, "what fits is untouched"
