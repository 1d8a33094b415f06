"""ScriptedOpenAIServer, driven by the official `openai` SDK over real HTTP on 127.0.0.1.

Each fault is checked as the SDK reports it, since that is what cairn's adapter will see.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import OpenAI

from cairn.testing import (
    Fault,
    FinishReason,
    ScriptedOpenAIServer,
    ToolCall,
    fault_answer,
    json_call_answer,
    text_answer,
    tool_call_answer,
)
from cairn.testing.openai_script import completion_tokens, estimate_tokens, prompt_tokens

KEY = "sk-scripted"
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("write_file", "read_file", "finish")
]
WRITE = ToolCall("write_file", {"path": "src/app.py", "content": "def greet():\n    return 1\n"})
READ = ToolCall("read_file", {"path": "README.md"})


def ask(marker: str, *more: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of a conversation named by `marker` in its first user message."""
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Job: {marker}"},
        *more,
    ]


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(api_key=KEY) as running:
        yield running


@pytest.fixture
def client(server: ScriptedOpenAIServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=30) as sdk:
        yield sdk


def test_a_text_answer_is_a_chat_completion_with_estimated_usage(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", text_answer("All done."))
    answer = client.chat.completions.create(model="qwen", messages=ask("greet"))
    choice = answer.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("All done.", "stop")
    assert answer.model == "qwen" and answer.object == "chat.completion"
    body = server.requests[0].body
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == prompt_tokens(body) == server.requests[0].prompt_tokens > 0
    assert answer.usage.completion_tokens == estimate_tokens("All done.") == 3


def test_parallel_tool_calls_arrive_in_one_answer(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", tool_call_answer(WRITE, READ))
    answer = client.chat.completions.create(model="m", messages=ask("greet"), tools=TOOLS)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("write_file", WRITE.arguments),
        ("read_file", READ.arguments),
    ]
    assert len({c.id for c in calls}) == 2
    assert answer.usage is not None
    assert answer.usage.completion_tokens == completion_tokens(tool_call_answer(WRITE, READ))


def test_a_stream_splits_text_and_tool_arguments_and_ends_with_usage(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", tool_call_answer(WRITE, READ, text="Writing it."))
    stream = client.chat.completions.create(
        model="m",
        messages=ask("greet"),
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    pieces: dict[int, list[str]] = {}
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if call.function and call.function.arguments:
                pieces.setdefault(call.index, []).append(call.function.arguments)
    assert text == "Writing it."
    assert all(len(parts) > 1 for parts in pieces.values()), "arguments span several chunks"
    assert [json.loads("".join(pieces[i])) for i in (0, 1)] == [WRITE.arguments, READ.arguments]
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "tool_calls" and reasons.count("tool_calls") == 1
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_a_stream_without_include_usage_carries_no_usage(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", text_answer("Cut off", finish_reason=FinishReason.length))
    chunks = list(client.chat.completions.create(model="m", messages=ask("greet"), stream=True))
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_a_fenced_json_call_is_plain_text_without_tool_calls(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", json_call_answer("write_file", dict(WRITE.arguments)))
    message = client.chat.completions.create(model="m", messages=ask("greet")).choices[0].message
    assert message.tool_calls is None and message.content is not None
    fenced = message.content.removeprefix("```json\n").removesuffix("\n```")
    assert json.loads(fenced) == {"name": "write_file", "arguments": WRITE.arguments}


def test_two_interleaved_conversations_each_replay_their_own_script(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("first job", text_answer("first 1"), text_answer("first 2"))
    server.add_answers("second job", text_answer("second 1"), text_answer("second 2"))
    order = ["first job", "second job", "second job", "first job"]
    said = [
        client.chat.completions.create(model="m", messages=ask(marker)).choices[0].message.content
        for marker in order
    ]
    assert said == ["first 1", "second 1", "second 2", "first 2"]
    assert [(r.conversation, r.answer_index) for r in server.requests] == [
        ("first job", 0),
        ("second job", 0),
        ("second job", 1),
        ("first job", 1),
    ]
    assert [r.text.count("second job") for r in server.requests_for("first job")] == [0, 0]
    assert server.remaining("first job") == server.remaining("second job") == 0


def test_the_system_prompt_can_name_the_conversation(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("room alpha", text_answer("hello"))
    messages = [
        {"role": "system", "content": "You work in room alpha."},
        {"role": "user", "content": "Hi"},
    ]
    assert client.chat.completions.create(model="m", messages=messages).choices[0].message.content
    assert server.requests[0].conversation == "room alpha"


def test_concurrent_requests_of_one_conversation_get_distinct_answers(
    server: ScriptedOpenAIServer,
) -> None:
    server.add_answers("busy", *(text_answer(f"answer {n}") for n in range(8)))
    said: list[str | None] = []

    def one() -> None:
        with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as sdk:
            answer = sdk.chat.completions.create(model="m", messages=ask("busy"))
            said.append(answer.choices[0].message.content)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(said, key=str) == sorted((f"answer {n}" for n in range(8)), key=str)


def test_every_request_is_recorded_without_the_key(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", text_answer("ok"))
    client.chat.completions.create(
        model="m", messages=ask("greet"), tools=TOOLS, extra_headers={"X-Job": "7"}
    )
    client.models.list()
    post, get = server.requests
    assert post.body["model"] == "m" and post.messages == ask("greet")
    assert post.tool_names == ["write_file", "read_file", "finish"]
    assert post.headers["x-job"] == "7" and "authorization" not in post.headers
    assert KEY not in json.dumps(dict(post.headers))
    assert post.authorization_present and post.authorization_matched
    assert (get.method, get.path, get.conversation) == ("GET", "/v1/models", None)


def test_the_model_list_names_the_servers_models(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    assert [model.id for model in client.models.list()] == ["cairn-scripted"]


def test_a_wrong_key_gets_401_and_a_missing_one_is_recorded_as_absent(
    server: ScriptedOpenAIServer,
) -> None:
    server.add_answers("greet", text_answer("never sent"))
    with (
        OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0) as sdk,
        pytest.raises(openai.AuthenticationError),
    ):
        sdk.chat.completions.create(model="m", messages=ask("greet"))
    bare = urllib.request.Request(f"{server.base_url}/models")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(bare, timeout=30)
    refused.value.close()
    assert refused.value.code == 401
    wrong, missing = server.requests
    assert (wrong.authorization_present, wrong.authorization_matched) == (True, False)
    assert (missing.authorization_present, missing.authorization_matched) == (False, False)
    assert server.remaining("greet") == 1, "a refused request uses no answer"


def test_a_drop_mid_stream_is_a_connection_error_after_some_chunks(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers(
        "greet", tool_call_answer(WRITE).with_fault(Fault.drop_connection, after_chunks=3)
    )
    received = []
    stream = client.chat.completions.create(model="m", messages=ask("greet"), stream=True)
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            received.append(chunk)
    assert len(received) == 3
    assert all(c.choices[0].finish_reason is None for c in received)


def test_a_drop_before_a_non_streamed_answer_is_a_connection_error(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", fault_answer(Fault.drop_connection))
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=ask("greet"))


def test_a_stream_can_end_without_a_finish_reason(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", text_answer("half an answer").with_fault(Fault.no_finish_reason))
    chunks = list(client.chat.completions.create(model="m", messages=ask("greet"), stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "half an answer"
    assert all(c.choices[0].finish_reason is None for c in chunks)


def test_a_hang_is_a_timeout_for_a_short_client_timeout(server: ScriptedOpenAIServer) -> None:
    server.add_answers("greet", fault_answer(Fault.hang))
    with (
        OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=0.5) as sdk,
        pytest.raises(openai.APITimeoutError),
    ):
        sdk.chat.completions.create(model="m", messages=ask("greet"))


def test_closing_ends_a_hanging_request(server: ScriptedOpenAIServer) -> None:
    server.add_answers("greet", fault_answer(Fault.hang))
    with pytest.raises(TimeoutError, match="0 requests arrived, not 1"):
        server.wait_for_requests(1, timeout=0)
    errors: list[Exception] = []

    def wait_forever() -> None:
        with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=600) as sdk:
            try:
                sdk.chat.completions.create(model="m", messages=ask("greet"))
            except openai.APIConnectionError as error:
                errors.append(error)

    waiting = threading.Thread(target=wait_forever)
    waiting.start()
    assert server.wait_for_requests(1)[0].conversation == "greet"
    server.close()
    waiting.join()
    assert len(errors) == 1


@pytest.mark.parametrize(
    ("fault", "error"),
    [(Fault.server_error, openai.InternalServerError), (Fault.rate_limited, openai.RateLimitError)],
)
def test_http_error_faults_reach_the_sdk_as_status_errors(
    server: ScriptedOpenAIServer, client: OpenAI, fault: Fault, error: type[Exception]
) -> None:
    server.add_answers("greet", fault_answer(fault))
    with pytest.raises(error):
        client.chat.completions.create(model="m", messages=ask("greet"))


def test_an_sdk_retry_is_the_conversations_next_request(server: ScriptedOpenAIServer) -> None:
    server.add_answers("greet", fault_answer(Fault.rate_limited), text_answer("second try"))
    with OpenAI(base_url=server.base_url, api_key=KEY, max_retries=1) as sdk:
        answer = sdk.chat.completions.create(model="m", messages=ask("greet"))
    assert answer.choices[0].message.content == "second try"
    assert [r.answer_index for r in server.requests] == [0, 1]


def test_an_unknown_conversation_or_a_used_up_script_is_a_clear_400(
    server: ScriptedOpenAIServer, client: OpenAI
) -> None:
    server.add_answers("greet", text_answer("once"))
    client.chat.completions.create(model="m", messages=ask("greet"))
    with pytest.raises(openai.BadRequestError, match="has no answer 2"):
        client.chat.completions.create(model="m", messages=ask("greet"))
    with pytest.raises(openai.BadRequestError, match="no conversation marker"):
        client.chat.completions.create(model="m", messages=ask("something else"))
    assert [r.conversation for r in server.requests] == ["greet", "greet", None]


def test_the_plugin_fixture_serves_with_its_own_key(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.add_answers("greet", text_answer("from the fixture"))
    with OpenAI(base_url=openai_server.base_url, api_key=openai_server.api_key) as sdk:
        answer = sdk.chat.completions.create(model="m", messages=ask("greet"))
    assert answer.choices[0].message.content == "from the fixture"
    assert openai_server.requests[0].authorization_matched
