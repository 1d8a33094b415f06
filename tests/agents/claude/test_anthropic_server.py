"""ScriptedAnthropicServer over real HTTP: Anthropic's SSE event order, plain messages, tool use,
per-conversation scripts, faults, and a record of every request without the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cairn.testing import (
    Fault,
    ScriptedAnthropicServer,
    ToolUse,
    fault_reply,
    text_reply,
    tool_use_reply,
)

KEY = "sk-ant-test-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[ScriptedAnthropicServer]:
    with ScriptedAnthropicServer(api_key=KEY) as running:
        yield running


def _body(prompt: str, *, stream: bool) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
    }


def _post(server: ScriptedAnthropicServer, body: Any, key: str = KEY) -> httpx.Response:
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    return httpx.post(f"{server.base_url}/v1/messages?beta=true", json=body, headers=headers)


def _events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in response.text.strip().split("\n\n"):
        name, data = block.split("\n", 1)
        found.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return found


def test_a_streamed_tool_use_follows_anthropics_event_order(
    server: ScriptedAnthropicServer,
) -> None:
    use = ToolUse("Write", {"file_path": "/w/a.txt", "content": "a long enough content\n"})
    server.add_answers("job one", tool_use_reply(use, text="Writing."))
    response = _post(server, _body("job one: write", stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 2 == names.count("content_block_stop")
    partial = "".join(
        data["delta"]["partial_json"]
        for name, data in events
        if name == "content_block_delta" and data["delta"]["type"] == "input_json_delta"
    )
    assert (
        json.loads(partial) == dict(use.input)
        and len([d for n, d in events if n == "content_block_delta" and d["index"] == 1]) > 1
    ), "the input spans several deltas"
    started = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert started[1] == {"type": "tool_use", "id": "toolu_0_0_0", "name": "Write", "input": {}}
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0
    assert events[0][1]["message"]["usage"]["input_tokens"] > 0


def test_a_plain_request_gets_the_whole_message(server: ScriptedAnthropicServer) -> None:
    server.add_answers("plain one", text_reply("Hello there."))
    message = _post(server, _body("plain one", stream=False)).json()
    assert message["type"] == "message" and message["stop_reason"] == "end_turn"
    assert message["content"] == [{"type": "text", "text": "Hello there."}]


def test_two_conversations_each_get_their_own_script_and_requests_are_recorded(
    server: ScriptedAnthropicServer,
) -> None:
    server.add_answers("job A", text_reply("A1"), text_reply("A2"))
    server.add_answers("job B", text_reply("B1"))
    answers = [
        _post(server, _body(prompt, stream=False)).json()["content"][0]["text"]
        for prompt in ("job A", "job B", "job A")
    ]
    assert answers == ["A1", "B1", "A2"]
    assert [r.answer_index for r in server.requests_for("job A")] == [0, 1]
    recorded = server.requests[0]
    assert recorded.key_present and recorded.key_matched and recorded.path == "/v1/messages"
    assert KEY not in json.dumps([dict(r.headers) for r in server.requests])
    assert recorded.tool_names == ["Write"] and "job A" in recorded.text


@pytest.mark.parametrize(
    ("prompt", "said"),
    [("nobody's marker", "no conversation marker"), ("job A and job B", "markers")],
)
def test_a_request_matching_no_single_script_is_a_400_saying_why(
    server: ScriptedAnthropicServer, prompt: str, said: str
) -> None:
    server.add_answers("job A", text_reply("A"))
    server.add_answers("job B", text_reply("B"))
    refused = _post(server, _body(prompt, stream=False))
    assert refused.status_code == 400 and said in refused.json()["error"]["message"]


def test_a_wrong_key_is_a_401_and_other_routes_answer_for_reachability(
    server: ScriptedAnthropicServer,
) -> None:
    assert _post(server, _body("x", stream=False), key="wrong").status_code == 401
    assert not server.requests[-1].key_matched
    assert httpx.head(server.base_url).status_code == 200
    counted = httpx.post(
        f"{server.base_url}/v1/messages/count_tokens",
        json=_body("x", stream=False),
        headers={"x-api-key": KEY},
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


def test_faults_drop_a_stream_mid_answer_and_fail_with_errors(
    server: ScriptedAnthropicServer,
) -> None:
    server.add_answers(
        "faulty",
        text_reply("cut off here").with_fault(Fault.drop_connection, after_events=2),
        fault_reply(Fault.server_error),
        fault_reply(Fault.rate_limited),
        text_reply("never sent").with_fault(Fault.drop_connection),
    )
    with pytest.raises(httpx.RemoteProtocolError):
        _post(server, _body("faulty", stream=True))
    assert _post(server, _body("faulty", stream=False)).status_code == 500
    assert _post(server, _body("faulty", stream=False)).status_code == 429
    with pytest.raises(httpx.RemoteProtocolError):
        _post(server, _body("faulty", stream=False))
    assert server.remaining("faulty") == 0


def test_a_hanging_reply_holds_the_request_open_until_the_client_gives_up(
    server: ScriptedAnthropicServer,
) -> None:
    server.add_answers("hang", fault_reply(Fault.hang))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{server.base_url}/v1/messages",
            json=_body("hang", stream=True),
            headers={"x-api-key": KEY},
            timeout=0.5,
        )
    assert server.requests_for("hang")[0].answer_index == 0
