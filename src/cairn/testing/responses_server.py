"""ScriptedResponsesServer: a real OpenAI Responses API server on 127.0.0.1.

It stands in for OpenAI (or any Responses-compatible endpoint) under a client that speaks the
Responses API, such as Codex CLI (`wire_api = "responses"`) or the `openai` SDK's
`client.responses`: real HTTP, `POST /v1/responses` streamed as server-sent events
(`event: NAME` / `data: JSON`, from `response.created` to `response.completed` with usage) or
not, and `GET /v1/models` (the SDK's list, plus the `models` catalog Codex CLI asks for as
`/v1/models?client_version=...` from providers that serve one; see
`responses_script.codex_catalog_entry`). Codex CLI 0.171.0 edits through it with its
`apply_patch` custom tool and runs `exec_command` function calls.

It replays the chat server's answers (`openai_script.Answer`) per conversation. A conversation
is named by a marker the test chooses, found in the request's instructions or its system,
developer or user messages; a request that continues a response of this server
(`previous_response_id`) belongs to that response's conversation. Each request of a
conversation gets its next answer, so two interleaved conversations each see their own script.
Every request is recorded (`requests`), the Authorization value reduced to whether it was
present and matched.

    script = {"add a greeting": [tool_call_answer(CustomToolCall("apply_patch", PATCH))]}
    with ScriptedResponsesServer(script) as server:
        client = OpenAI(base_url=server.base_url, api_key="any")

A request that matches no marker, several, or a used-up script gets an HTTP 400 that tells the
SDK not to retry and names why.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler
from typing import Any, cast
from urllib.parse import urlsplit

from cairn.testing import responses_script as wire
from cairn.testing.loopback import LoopbackServer
from cairn.testing.openai_script import CREATED, Answer, Fault
from cairn.testing.openai_server import DEFAULT_MODELS
from cairn.testing.responses_script import CustomToolCall, Ids
from cairn.testing.scripted_server import ScriptedServer


@dataclass(frozen=True)
class RecordedResponsesRequest:
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
    def input(self) -> list[dict[str, Any]]:
        """The request's input items (a string input as one user message)."""
        return wire.input_items(self.body) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the request offered the model."""
        return wire.tool_names(self.body) if isinstance(self.body, dict) else []

    @property
    def tool_outputs(self) -> dict[str, str]:
        """The tool results the request carried: call_id -> output."""
        return wire.tool_outputs(self.body) if isinstance(self.body, dict) else {}

    @property
    def prompt_tokens(self) -> int:
        """The server's token estimate of the request, as its `usage` reports it."""
        return wire.prompt_tokens(self.body) if isinstance(self.body, dict) else 0

    @property
    def text(self) -> str:
        """The instructions and every message's text, joined: what a conversation saw."""
        if not isinstance(self.body, dict):
            return ""
        instructions = self.body.get("instructions")
        texts = [instructions] if isinstance(instructions, str) else []
        return "\n".join(texts + [wire.item_text(item) for item in self.input])


class ScriptedResponsesServer(ScriptedServer[RecordedResponsesRequest, Answer]):
    """Serves `scripts` (marker -> answers) on an ephemeral port of 127.0.0.1; thread-safe.

    It starts serving when created; `close()` (or leaving the `with` block) stops it promptly,
    also with hanging requests open. With `api_key` set, a request without that bearer key
    gets HTTP 401. `codex_models` are Codex CLI model catalog entries for `GET /v1/models`.
    """

    def __init__(
        self,
        scripts: Mapping[str, Sequence[Answer]] = {},
        *,
        api_key: str | None = None,
        models: Sequence[str] = DEFAULT_MODELS,
        codex_models: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.models = tuple(models)
        self.codex_models = [dict(entry) for entry in codex_models]
        self._responses: dict[str, str] = {}  # response id -> its conversation's marker
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

    def take_answer(
        self, request: RecordedResponsesRequest
    ) -> tuple[RecordedResponsesRequest, Answer | str]:
        """Record `request` with its conversation; its next answer, or why there is none."""
        body: dict[str, Any] = request.body
        head = wire.conversation_head(body)
        with self._lock:
            self._arrived.notify_all()  # whichever way it is recorded below
            previous = self._responses.get(str(body.get("previous_response_id")))
            matches = [previous] if previous else [m for m in self._markers if m in head]
            if len(matches) != 1:
                self._requests.append(request)
                found = "no conversation marker" if not matches else f"markers {matches}"
                return request, f"the request's instructions and messages hold {found}"
            marker = matches[0]
            index = self._served[marker]
            if index >= len(self._scripts[marker]):
                self._requests.append(replace(request, conversation=marker))
                return request, f"the script of {marker!r} has no answer {index + 1}"
            recorded = replace(request, conversation=marker, answer_index=index)
            self._requests.append(recorded)
            self._served[marker] = index + 1
            return recorded, self._scripts[marker][index]

    def ids(self, marker: str, index: int, answer: Answer) -> Ids:
        """Deterministic ids, unique in this server, for one answer; remembers its response."""
        with self._lock:
            name = f"{self._markers.index(marker)}_{index}"
            self._responses[f"resp_{name}"] = marker
        items = tuple(
            f"{'ctc' if isinstance(call, CustomToolCall) else 'fc'}_{name}_{n}"
            for n, call in enumerate(answer.tool_calls)
        )
        calls = tuple(call.id or f"call_{name}_{n}" for n, call in enumerate(answer.tool_calls))
        return Ids(response=f"resp_{name}", message=f"msg_{name}", items=items, calls=calls)

    def wait_until_closed(self) -> None:
        """Block until the server closes (a hanging answer)."""
        self._closing.wait()


class _Handler(BaseHTTPRequestHandler):
    """One connection: responses, the model list, and the scripted faults."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as real servers speak

    @property
    def owner(self) -> ScriptedResponsesServer:
        owner: ScriptedResponsesServer = cast(LoopbackServer, self.server).owner
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
        """`GET /v1/models`: the model list, in the SDK's shape and Codex CLI's."""
        request = self._received(None)
        if self._refused(request, "/v1/models"):
            return
        self.owner.record(request)
        models = [
            {"id": model, "object": "model", "created": CREATED, "owned_by": "cairn"}
            for model in self.owner.models
        ]
        self._send_json(200, {"object": "list", "data": models, "models": self.owner.codex_models})

    def do_POST(self) -> None:
        """`POST /v1/responses`: the conversation's next scripted answer."""
        try:
            body = json.loads(self._read_body())
        except ValueError:
            body = None
        request = self._received(body)
        if self._refused(request, "/v1/responses"):
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

    def _read_body(self) -> bytes:
        """The request body, sent with a Content-Length or chunked (as some clients stream it)."""
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b""
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            body += self.rfile.read(size)
            self.rfile.readline()  # the CRLF after each chunk
        while self.rfile.readline().strip():
            pass  # trailers, up to the blank line
        return body

    def _received(self, body: Any) -> RecordedResponsesRequest:
        header = self.headers.get("Authorization")
        present, matched = self.owner.authorize(header)
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        return RecordedResponsesRequest(
            method=self.command,
            path=self.path,
            headers=headers,
            body=body,
            authorization_present=present,
            authorization_matched=matched,
        )

    def _refused(self, request: RecordedResponsesRequest, path: str) -> bool:
        """Record and answer 404 or 401 when the request is for no route or lacks the key."""
        # Codex CLI asks for its model catalog as /v1/models?client_version=...
        if urlsplit(self.path).path == path and request.authorization_matched:
            return False
        self.owner.record(request)
        if urlsplit(self.path).path != path:
            self._send_error(404, f"no route {self.command} {self.path}", retry=False)
        else:
            self._send_error(401, "Incorrect API key provided.", kind="invalid_api_key")
        return True

    def _answer(self, request: RecordedResponsesRequest, answer: Answer) -> None:
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
        assert request.conversation is not None and request.answer_index is not None
        body: dict[str, Any] = request.body
        ids = self.owner.ids(request.conversation, request.answer_index, answer)
        used = wire.usage(wire.prompt_tokens(body), wire.completion_tokens(answer))
        if body.get("stream"):
            self._stream(wire.stream_events(body, answer, ids, used), answer)
        elif answer.fault is Fault.drop_connection:
            self._drop()
        else:
            status = wire.final_status(answer)
            if answer.fault is Fault.no_finish_reason:
                status = "in_progress"  # a response that never finished, and says so
            output = wire.output_items(answer, ids, status=status)
            payload = wire.response_object(
                body, answer, ids, status=status, output=output, used=used
            )
            self._send_json(200, payload)

    def _stream(self, events: list[wire.Event], answer: Answer) -> None:
        """Server-sent events in a chunked body; a drop leaves the body incomplete."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        dropping = answer.fault is Fault.drop_connection
        for sent, (name, payload) in enumerate(events):
            if dropping and sent >= answer.after_chunks:
                self._drop()
                return
            self._write_chunk(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
        if dropping:
            self._drop()
            return
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
