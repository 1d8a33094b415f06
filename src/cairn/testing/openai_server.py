"""ScriptedOpenAIServer: a real OpenAI-compatible chat completions server on 127.0.0.1.

It stands in for vLLM, Ollama, llama.cpp or a hosted API in tests: the client under test talks
real HTTP to it (`POST /v1/chat/completions`, streaming or not, and `GET /v1/models`), and it
replays a script per conversation. A conversation is named by a marker the test chooses, a
string found in the request's system (or developer) messages or its first user message (with
`markers_anywhere=True`, in any of its system or user messages: for a client such as Aider
that opens every request with the same example exchange); each
request of that conversation gets the conversation's next `Answer`, so two interleaved
conversations each see their own script. Every request is recorded (`requests`), the
Authorization value reduced to whether it was present and matched.

    script = {"add a greeting": [tool_call_answer(ToolCall("finish", {"summary": "hi"}))]}
    with ScriptedOpenAIServer(script) as server:
        client = OpenAI(base_url=server.base_url, api_key="any")

An SDK retry is a new request and gets the next answer. A request that matches no marker,
several, or a used-up script gets an HTTP 400 that tells the SDK not to retry and names why.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler
from typing import Any, cast

from cairn.testing import openai_script as wire
from cairn.testing.loopback import LoopbackServer
from cairn.testing.openai_script import Answer, Fault
from cairn.testing.scripted_server import ScriptedServer

DEFAULT_MODELS = ("cairn-scripted",)
TEST_API_KEY = "cairn-test-key"  # the `openai_server` fixture's key: not a secret


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (the Authorization value never kept)."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names, without Authorization
    body: Any  # the parsed JSON body; None for a GET or a body that is not JSON
    authorization_present: bool
    authorization_matched: bool  # the bearer key was the server's (always, with no key set)
    conversation: str | None = None  # the marker it matched, when it matched one
    answer_index: int | None = None  # which answer of that conversation's script it got

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages the request carried."""
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the request offered the model."""
        tools = (self.body.get("tools") or []) if isinstance(self.body, dict) else []
        return [tool["function"]["name"] for tool in tools]

    @property
    def prompt_tokens(self) -> int:
        """The server's token estimate of the request, as its `usage` reports it."""
        return wire.prompt_tokens(self.body) if isinstance(self.body, dict) else 0

    @property
    def text(self) -> str:
        """Every message's text content, joined: for asserting what a conversation saw."""
        return "\n".join(wire.content_text(message) for message in self.messages)


class ScriptedOpenAIServer(ScriptedServer[RecordedRequest, Answer]):
    """Serves `scripts` (marker -> answers) on an ephemeral port of 127.0.0.1; thread-safe.

    It starts serving when created; `close()` (or leaving the `with` block) stops it promptly,
    also with hanging requests open. With `api_key` set, a request without that bearer key
    gets HTTP 401.
    """

    def __init__(
        self,
        scripts: Mapping[str, Sequence[Answer]] = {},
        *,
        api_key: str | None = None,
        models: Sequence[str] = DEFAULT_MODELS,
        markers_anywhere: bool = False,
    ) -> None:
        self.markers_anywhere = markers_anywhere
        self.models = tuple(models)
        super().__init__(scripts, _Handler, api_key=api_key)

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as `base_url` (it ends in /v1, as OpenAI's does)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # The handler's side: called from request threads.

    def authorize(self, header: str | None) -> tuple[bool, bool]:
        """Whether an Authorization header was present, and whether it carried the key."""
        if self.api_key is None:
            return header is not None, True
        return header is not None, header == f"Bearer {self.api_key}"

    def take_answer(self, request: RecordedRequest) -> tuple[RecordedRequest, Answer | str]:
        """Record `request` with its conversation; its next answer, or why there is none."""
        if self.markers_anywhere:
            head = wire.conversation_text(request.messages)
        else:
            head = wire.conversation_head(request.messages)
        with self._lock:
            matches = [marker for marker in self._markers if marker in head]
            self._arrived.notify_all()  # whichever way it is recorded below
            if len(matches) != 1:
                self._requests.append(request)
                found = "no conversation marker" if not matches else f"markers {matches}"
                return request, f"the request's opening messages hold {found}"
            marker = matches[0]
            index = self._served[marker]
            if index >= len(self._scripts[marker]):
                self._requests.append(replace(request, conversation=marker))
                return request, f"the script of {marker!r} has no answer {index + 1}"
            recorded = replace(request, conversation=marker, answer_index=index)
            self._requests.append(recorded)
            self._served[marker] = index + 1
            return recorded, self._scripts[marker][index]

    def ids(self, marker: str, index: int, answer: Answer) -> tuple[str, list[str]]:
        """Deterministic ids, unique in this server: the completion's and its tool calls'."""
        with self._lock:
            name = f"{self._markers.index(marker)}_{index}"
        calls = [call.id or f"call_{name}_{n}" for n, call in enumerate(answer.tool_calls)]
        return f"chatcmpl-{name}", calls

    def wait_until_closed(self) -> None:
        """Block until the server closes (a hanging answer)."""
        self._closing.wait()


class _Handler(BaseHTTPRequestHandler):
    """One connection: chat completions, the model list, and the scripted faults."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as real servers speak

    @property
    def owner(self) -> ScriptedOpenAIServer:
        owner: ScriptedOpenAIServer = cast(LoopbackServer, self.server).owner
        return owner

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read `requests`, not a log on stderr."""

    def handle(self) -> None:
        """Serve the connection; a client that resets it (a closed keep-alive) ends it quietly."""
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            self.close_connection = True

    def do_GET(self) -> None:
        """`GET /v1/models`: the server's model list."""
        request = self._received(None)
        if self._refused(request, "/v1/models"):
            return
        self.owner.record(request)
        models = [
            {"id": model, "object": "model", "created": wire.CREATED, "owned_by": "cairn"}
            for model in self.owner.models
        ]
        self._send_json(200, {"object": "list", "data": models})

    def do_POST(self) -> None:
        """`POST /v1/chat/completions`: the conversation's next scripted answer."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        request = self._received(body)
        if self._refused(request, "/v1/chat/completions"):
            return
        if not isinstance(body, dict):
            self.owner.record(request)
            self._send_error(400, "the request body is not a JSON object", retry=False)
            return
        recorded, answer = self.owner.take_answer(request)
        if isinstance(answer, str):
            self._send_error(400, answer, retry=False)
            return
        try:
            self._answer(recorded, answer)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (its timeout): nothing to do

    def _received(self, body: Any) -> RecordedRequest:
        header = self.headers.get("Authorization")
        present, matched = self.owner.authorize(header)
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        return RecordedRequest(
            method=self.command,
            path=self.path,
            headers=headers,
            body=body,
            authorization_present=present,
            authorization_matched=matched,
        )

    def _refused(self, request: RecordedRequest, path: str) -> bool:
        """Record and answer 404 or 401 when the request is for no route or lacks the key."""
        if self.path == path and request.authorization_matched:
            return False
        self.owner.record(request)
        if self.path != path:
            self._send_error(404, f"no route {self.command} {self.path}", retry=False)
            return True
        else:
            self._send_error(401, "Incorrect API key provided.", kind="invalid_api_key")
        return True

    def _answer(self, request: RecordedRequest, answer: Answer) -> None:
        if answer.fault is Fault.hang:
            self.owner.wait_until_closed()
            self.close_connection = True
            return
        if answer.fault is Fault.server_error:
            self._send_error(500, "The server had an error (scripted).", kind="server_error")
            return
        if answer.fault is Fault.rate_limited:
            self._send_error(429, "Rate limit reached (scripted).", kind="rate_limit_exceeded")
            return
        if answer.fault is Fault.model_not_found:
            model = str(request.body.get("model", "")) if isinstance(request.body, dict) else ""
            message = f"The model `{model}` does not exist (scripted)."
            self._send_error(404, message, kind="model_not_found", retry=False)
            return
        assert request.conversation is not None and request.answer_index is not None
        body: dict[str, Any] = request.body
        completion_id, call_ids = self.owner.ids(request.conversation, request.answer_index, answer)
        used = wire.usage(wire.prompt_tokens(body), wire.completion_tokens(answer))
        model = str(body.get("model", ""))
        if body.get("stream"):
            options = body.get("stream_options") or {}
            chunks = wire.stream_chunks(
                answer,
                completion_id=completion_id,
                model=model,
                call_ids=call_ids,
                used=used if options.get("include_usage") else None,
            )
            self._stream(chunks, answer)
        elif answer.fault is Fault.drop_connection:
            self._drop()
        else:
            completion = wire.completion_object(
                answer, completion_id=completion_id, model=model, call_ids=call_ids, used=used
            )
            self._send_json(200, completion)

    def _stream(self, chunks: list[dict[str, Any]], answer: Answer) -> None:
        """Server-sent events in a chunked body; a drop leaves the body incomplete."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        dropping = answer.fault is Fault.drop_connection
        for sent, chunk in enumerate(chunks):
            if dropping and sent >= answer.after_chunks:
                break
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        if dropping:
            self._drop()
            return
        if answer.fault is not Fault.no_finish_reason:
            self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection here and now, whatever the client still expects."""
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client closed first
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(
        self, status: int, message: str, *, kind: str = "invalid_request_error", retry: bool = True
    ) -> None:
        """An error in OpenAI's shape; `retry=False` tells the SDK a retry cannot help."""
        headers = {} if retry else {"x-should-retry": "false"}
        if status == 429:
            headers["retry-after-ms"] = "10"  # real limits say when; keeps retrying tests quick
        error = {"message": message, "type": kind, "param": None, "code": kind}
        self._send_json(status, {"error": error}, headers)
