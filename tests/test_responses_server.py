"""ScriptedResponsesServer, driven by the official `openai` SDK over real HTTP on 127.0.0.1.

Every event and response is also validated strictly against the SDK's own types (the SDK
itself builds them without validation), so a field the real API always sends cannot be missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from cairn.testing import (
    CustomToolCall,
    Fault,
    FinishReason,
    ScriptedResponsesServer,
    ToolCall,
    codex_catalog_entry,
    fault_answer,
    text_answer,
    tool_call_answer,
)
from cairn.testing.openai_script import estimate_tokens
from cairn.testing.openai_server import TEST_API_KEY
from cairn.testing.responses_script import prompt_tokens

MODEL = "cairn-scripted"
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
SHELL = ToolCall("shell", {"command": ["ls", "-la"], "workdir": "."})
TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "description": "Runs a command",
        "parameters": {"type": "object", "properties": {"command": {"type": "array"}}},
        "strict": False,
    },
    {"type": "custom", "name": "apply_patch", "description": "Applies a patch"},
]


@pytest.fixture
def server() -> Iterator[ScriptedResponsesServer]:
    with ScriptedResponsesServer(api_key=TEST_API_KEY) as scripted:
        yield scripted


_OPEN: list[OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _client(server: ScriptedResponsesServer, **options: Any) -> OpenAI:
    """An SDK client that does not retry (closed after the test)."""
    options = {"api_key": TEST_API_KEY, "max_retries": 0} | options
    _OPEN.append(OpenAI(base_url=server.base_url, **options))
    return _OPEN[-1]


def _task(marker: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": f"{marker}: add hello.txt"}]


def _streamed(client: OpenAI, **request: Any) -> list[Any]:
    """Every event of a streamed response, each validated strictly by the SDK's types."""
    with client.responses.create(model=MODEL, stream=True, **request) as stream:
        events = list(stream)
    for event in events:
        EVENTS.validate_python(event.to_dict())
    return events


def test_a_streamed_text_answer_parses_with_the_sdk(server: ScriptedResponsesServer) -> None:
    text = "Done: hello.txt now greets whoever reads it."
    server.add_answers("job-a", text_answer(text))
    events = _streamed(_client(server), input=_task("job-a"), instructions="be brief")
    assert [e.type for e in events[:3]] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    final = events[-1].response
    Response.model_validate(final.to_dict())
    assert final.output_text == text and final.status == "completed"
    request = server.requests[0]
    assert final.usage.input_tokens == prompt_tokens(request.body)
    assert final.usage.output_tokens == estimate_tokens(text)
    assert request.conversation == "job-a" and request.answer_index == 0


def test_the_stream_is_named_events_of_json(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", tool_call_answer(SHELL, text="Looking first."))
    body = {"model": MODEL, "stream": True, "input": _task("job-a")}
    headers = {"Authorization": f"Bearer {TEST_API_KEY}"}
    with httpx.stream("POST", f"{server.base_url}/responses", json=body, headers=headers) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        blocks = raw.read().decode().split("\n\n")
    assert blocks.pop() == ""  # the body ends with the last event's blank line
    for block in blocks:
        name_line, data_line = block.split("\n")
        name = name_line.removeprefix("event: ")
        assert json.loads(data_line.removeprefix("data: "))["type"] == name
    names = [block.split("\n")[0].removeprefix("event: ") for block in blocks]
    assert "response.function_call_arguments.delta" in names
    assert names.index("response.function_call_arguments.done") < names.index("response.completed")


def test_a_chunked_request_body_is_read(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", text_answer("read it"))
    body = json.dumps({"model": MODEL, "input": "job-a: add hello.txt"}).encode()
    pieces = iter([body[:10], body[10:]])  # an iterator: httpx sends it chunked
    headers = {"Authorization": f"Bearer {TEST_API_KEY}", "Content-Type": "application/json"}
    answer = httpx.post(f"{server.base_url}/responses", content=pieces, headers=headers)
    assert answer.status_code == 200
    assert answer.json()["output"][0]["content"][0]["text"] == "read it"
    assert server.requests[0].headers["transfer-encoding"] == "chunked"


def test_a_non_streamed_answer_parses_with_the_sdk(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", text_answer("All done."))
    response = _client(server).responses.create(model=MODEL, input="job-a: add hello.txt")
    Response.model_validate(response.to_dict())
    assert response.output_text == "All done."
    assert response.status == "completed" and response.id == "resp_0_0"
    assert response.usage is not None and response.usage.output_tokens == estimate_tokens(
        "All done."
    )


def test_a_function_call_round_trips(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", tool_call_answer(SHELL), text_answer("I listed the files."))
    client = _client(server)
    events = _streamed(client, input=_task("job-a"), tools=TOOLS)
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["function_call"]
    call = done[0]
    assert call.name == "shell" and json.loads(call.arguments) == SHELL.arguments
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(pieces) > 1 and "".join(pieces) == call.arguments
    follow_up = [
        *_task("job-a"),
        {"type": "function_call", "call_id": call.call_id, "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call.call_id, "output": "hello.txt"},
    ]
    answer = client.responses.create(model=MODEL, input=follow_up, tools=TOOLS)
    assert answer.output_text == "I listed the files."
    second = server.requests[1]
    assert second.tool_outputs == {call.call_id: "hello.txt"}
    assert second.tool_names == ["shell", "apply_patch"]
    assert server.remaining("job-a") == 0


def test_a_custom_tool_call_streams_its_freeform_input(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", tool_call_answer(CustomToolCall("apply_patch", PATCH)))
    events = _streamed(_client(server), input=_task("job-a"), tools=TOOLS)
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(item.type, item.name, item.input) for item in done] == [
        ("custom_tool_call", "apply_patch", PATCH)
    ]
    pieces = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
    assert "".join(pieces) == PATCH
    assert [e.input for e in events if e.type == "response.custom_tool_call_input.done"] == [PATCH]
    with pytest.raises(TypeError, match="input is text"):
        CustomToolCall("apply_patch", {"patch": PATCH})


def test_a_continued_response_keeps_its_conversation(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", tool_call_answer(SHELL), text_answer("Listed."))
    client = _client(server)
    first = client.responses.create(model=MODEL, input=_task("job-a"), tools=TOOLS)
    call_id = first.output[0].call_id  # type: ignore[union-attr]
    output = [{"type": "function_call_output", "call_id": call_id, "output": "hello.txt"}]
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input=output)
    assert second.output_text == "Listed."
    assert [r.conversation for r in server.requests] == ["job-a", "job-a"]


def test_two_sessions_each_get_their_own_script(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", text_answer("a1"), text_answer("a2"))
    server.add_answers("job-b", text_answer("b1"), text_answer("b2"))
    client = _client(server)
    # Codex CLI sends its own context as user messages before the task: the marker is found.
    context = {"type": "message", "role": "user", "content": "<environment_context/>"}
    seen = [
        client.responses.create(model=MODEL, input=[context, *_task(marker)]).output_text
        for marker in ("job-a", "job-b", "job-b", "job-a")
    ]
    assert seen == ["a1", "b1", "b2", "a2"]
    assert all("job-a" in r.text for r in server.requests_for("job-a"))
    assert not any("job-b" in r.text for r in server.requests_for("job-a"))
    assert [r.answer_index for r in server.requests_for("job-b")] == [0, 1]


def test_a_request_of_no_known_conversation_is_refused_once(
    server: ScriptedResponsesServer,
) -> None:
    server.add_answers("job-a", text_answer("a1"))
    client = _client(server, max_retries=2)  # a refusal must say not to retry
    with pytest.raises(openai.BadRequestError, match="no conversation marker"):
        client.responses.create(model=MODEL, input="nobody's task")
    server.add_answers("job-a2", text_answer("x"))
    with pytest.raises(openai.BadRequestError, match="markers"):
        client.responses.create(model=MODEL, input="job-a and job-a2")
    assert client.responses.create(model=MODEL, input="job-a").output_text == "a1"
    with pytest.raises(openai.BadRequestError, match="has no answer 2"):
        client.responses.create(model=MODEL, input="job-a")
    assert len(server.requests) == 4  # the SDK retried none of the refusals


def test_a_dropped_stream_raises_in_the_sdk(server: ScriptedResponsesServer) -> None:
    answer = text_answer("This answer never arrives whole, it is cut off here.")
    server.add_answers("job-a", answer.with_fault(Fault.drop_connection, after_chunks=5))
    received: list[str] = []
    stream = _client(server).responses.create(model=MODEL, stream=True, input=_task("job-a"))
    with stream, pytest.raises(openai.APIConnectionError):
        for event in stream:
            received.append(event.type)
    assert len(received) == 5 and "response.completed" not in received


def test_a_dropped_answer_raises_in_the_sdk(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", fault_answer(Fault.drop_connection))
    with pytest.raises(openai.APIConnectionError):
        _client(server).responses.create(model=MODEL, input=_task("job-a"))


def test_a_hanging_answer_times_out_in_the_sdk(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", fault_answer(Fault.hang))
    with pytest.raises(openai.APITimeoutError):
        _client(server, timeout=0.5).responses.create(model=MODEL, input=_task("job-a"))


def test_a_stream_that_stops_without_its_final_event(server: ScriptedResponsesServer) -> None:
    half = text_answer("half").with_fault(Fault.no_finish_reason)
    server.add_answers("job-a", half, half)
    client = _client(server)
    events = _streamed(client, input=_task("job-a"))
    assert events[-1].type == "response.output_item.done"
    assert not any(e.type.startswith("response.completed") for e in events)
    assert client.responses.create(model=MODEL, input=_task("job-a")).status == "in_progress"


def test_an_answer_cut_at_the_token_limit_is_incomplete(server: ScriptedResponsesServer) -> None:
    server.add_answers(
        "job-a",
        text_answer("cut", finish_reason=FinishReason.length),
        text_answer("cut again", finish_reason=FinishReason.length),
    )
    client = _client(server)
    events = _streamed(client, input=_task("job-a"))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    response = client.responses.create(model=MODEL, input=_task("job-a"))
    assert response.status == "incomplete"


def test_server_errors_and_rate_limits_reach_the_sdk(server: ScriptedResponsesServer) -> None:
    server.add_answers("job-a", fault_answer(Fault.server_error), fault_answer(Fault.rate_limited))
    client = _client(server)
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model=MODEL, input=_task("job-a"))
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model=MODEL, input=_task("job-a"))


def test_a_wrong_key_is_refused_and_no_key_is_recorded(server: ScriptedResponsesServer) -> None:
    client = _client(server, api_key="sk-wrong-key-value")
    with pytest.raises(openai.AuthenticationError) as refused:
        client.responses.create(model=MODEL, input=_task("job-a"))
    refused.value.response.close()
    (request,) = server.requests
    assert request.authorization_present and not request.authorization_matched
    assert "sk-wrong-key-value" not in repr(request)


def test_the_model_list_serves_the_sdk_and_codex(server: ScriptedResponsesServer) -> None:
    assert [m.id for m in _client(server).models.list()] == ["cairn-scripted"]
    entry = codex_catalog_entry("cairn-scripted")
    with ScriptedResponsesServer(codex_models=[entry]) as codex_server:
        # Codex CLI asks for its catalog with its version in the query.
        answer = httpx.get(f"{codex_server.base_url}/models?client_version=0.50.0")
        assert answer.json()["models"] == [entry]
        assert codex_server.requests[0].path == "/v1/models?client_version=0.50.0"
    assert httpx.get(f"{server.base_url}/nothing").status_code == 404


def test_the_plugin_offers_a_responses_server(responses_server: ScriptedResponsesServer) -> None:
    responses_server.add_answers("job-a", text_answer("hi"))
    client = _client(responses_server, api_key=responses_server.api_key)
    assert client.responses.create(model=MODEL, input="job-a").output_text == "hi"
