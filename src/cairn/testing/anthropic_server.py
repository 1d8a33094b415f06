"""ScriptedAnthropicServer: a real Anthropic Messages API server on 127.0.0.1.

It stands in for Anthropic's API in tests of the coding CLIs that speak it (Claude Code): the
CLI talks real HTTP to it (`POST /v1/messages`, streamed as server-sent events or not, and
`POST /v1/messages/count_tokens`; `HEAD /` and `GET /` answer 200 for reachability checks),
and it replays a script per conversation. A conversation is named by a marker the test
chooses, found in the request's first user message (where a CLI puts its prompt); each request
of that conversation gets the conversation's next `Reply`, so two jobs' interleaved
conversations each see their own script. Every request is recorded (`requests`), the key
(`x-api-key` or a bearer Authorization) reduced to whether it was present and matched.

    script = {"add a greeting": [tool_use_reply(ToolUse("Write", {...})), text_reply("done")]}
    with ScriptedAnthropicServer(script) as server:
        env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "any"}

A retry is a new request and gets the next reply. A request that matches no marker, several,
or a used-up script gets an HTTP 400 (which clients do not retry) that names why.
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

from cairn.testing import anthropic_script as wire
from cairn.testing.anthropic_script import Reply
from cairn.testing.loopback import LoopbackServer
from cairn.testing.openai_script import Fault
from cairn.testing.scripted_server import ScriptedServer

TEST_ANTHROPIC_KEY = "sk-ant-cairn-test-key-0123456789"
"""The `anthropic_server` fixture's key: not a secret, but shaped like one, so tests that
look for it in the store, the output and the workspace look for what a leak would look like."""
_MESSAGES = "/v1/messages"
_COUNT_TOKENS = "/v1/messages/count_tokens"


@dataclass(frozen=True)
class RecordedMessages:
    """One request as the server received it (the key itself never kept)."""

    method: str
    path: str  # without the query (`?beta=true`)
    headers: Mapping[str, str]  # lower-case names, without x-api-key and Authorization
    body: Any  # the parsed JSON body; None for a HEAD or GET, or a body that is not JSON
    key_present: bool
    key_matched: bool  # the key was the server's (always, with no key set)
    conversation: str | None = None  # the marker it matched, when it matched one
    answer_index: int | None = None  # which reply of that conversation's script it got

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages the request carried."""
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the request offered the model."""
        tools = (self.body.get("tools") or []) if isinstance(self.body, dict) else []
        return [str(tool.get("name")) for tool in tools if isinstance(tool, dict)]

    @property
    def text(self) -> str:
        """Every text of every message (tool results too): what the conversation saw."""
        return wire.request_text(self.messages)

    @property
    def tool_results(self) -> list[str]:
        """The text of every `tool_result` block the request carried, in order."""
        found = []
        for message in self.messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(wire.request_text([{"content": block.get("content")}]))
        return found


class ScriptedAnthropicServer(ScriptedServer[RecordedMessages, Reply]):
    """Serves `scripts` (marker -> replies) on an ephemeral port of 127.0.0.1; thread-safe.

    It starts serving when created; `close()` (or leaving the `with` block) stops it promptly,
    also with hanging requests open. With `api_key` set, a request without it gets HTTP 401.
    """

    wait_seconds = 60.0  # a Claude Code turn starts a node process first

    def __init__(
        self, scripts: Mapping[str, Sequence[Reply]] = {}, *, api_key: str | None = None
    ) -> None:
        super().__init__(scripts, _Handler, api_key=api_key)

    @property
    def base_url(self) -> str:
        """The URL to give a client as ANTHROPIC_BASE_URL (no /v1: clients add it)."""
        return f"http://127.0.0.1:{self.port}"

    # The handler's side: called from request threads.

    def authorize(self, key: str | None) -> tuple[bool, bool]:
        """Whether a key was present, and whether it was the server's."""
        return key is not None, self.api_key is None or key == self.api_key

    def take_answer(self, request: RecordedMessages) -> tuple[RecordedMessages, Reply | str]:
        """Record `request` with its conversation; its next reply, or why there is none."""
        head = wire.first_user_text(request.messages)
        with self._lock:
            matches = [marker for marker in self._markers if marker in head]
            self._arrived.notify_all()
            if len(matches) != 1:
                self._requests.append(request)
                found = "no conversation marker" if not matches else f"markers {matches}"
                return request, f"the request's first user message holds {found}"
            marker = matches[0]
            index = self._served[marker]
            if index >= len(self._scripts[marker]):
                self._requests.append(replace(request, conversation=marker))
                return request, f"the script of {marker!r} has no reply {index + 1}"
            recorded = replace(request, conversation=marker, answer_index=index)
            self._requests.append(recorded)
            self._served[marker] = index + 1
            return recorded, self._scripts[marker][index]

    def ids(self, marker: str, index: int, reply: Reply) -> tuple[str, list[str]]:
        """Deterministic ids, unique in this server: the message's and its tool uses'."""
        with self._lock:
            name = f"{self._markers.index(marker)}_{index}"
        uses = [use.id or f"toolu_{name}_{n}" for n, use in enumerate(reply.tool_uses)]
        return f"msg_{name}", uses

    def wait_until_closed(self) -> None:
        """Block until the server closes (a hanging reply)."""
        self._closing.wait()


class _Handler(BaseHTTPRequestHandler):
    """One connection: messages, token counts, reachability, and the scripted faults."""

    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> ScriptedAnthropicServer:
        owner: ScriptedAnthropicServer = cast(LoopbackServer, self.server).owner
        return owner

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read `requests`, not a log on stderr."""

    def handle(self) -> None:
        """Serve the connection; a client that resets it ends it quietly."""
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            self.close_connection = True

    def do_HEAD(self) -> None:
        """`HEAD /` (a reachability check): 200, empty."""
        self.owner.record(self._received(None))
        self.send_response(200 if self._route() == "/" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        """`GET /`: 200 with an empty JSON object; anything else 404."""
        self.owner.record(self._received(None))
        if self._route() == "/":
            self._send_json(200, {})
        else:
            self._send_error(404, "not_found_error", f"no route GET {self._route()}")

    def do_POST(self) -> None:
        """`POST /v1/messages` (the conversation's next reply) or `/v1/messages/count_tokens`."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        request = self._received(body)
        if self._refused(request):
            return
        if not isinstance(body, dict):
            self.owner.record(request)
            self._send_error(400, "invalid_request_error", "the body is not a JSON object")
            return
        if request.path == _COUNT_TOKENS:
            self.owner.record(request)
            self._send_json(200, {"input_tokens": wire.input_tokens(body)})
            return
        recorded, reply = self.owner.take_answer(request)
        if isinstance(reply, str):
            self._send_error(400, "invalid_request_error", reply)
            return
        try:
            self._answer(recorded, reply)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self) -> str:
        return urlsplit(self.path).path

    def _received(self, body: Any) -> RecordedMessages:
        key = self.headers.get("x-api-key")
        bearer = self.headers.get("Authorization")
        if key is None and bearer is not None:
            key = bearer.removeprefix("Bearer ").strip()
        present, matched = self.owner.authorize(key)
        hidden = ("x-api-key", "authorization")
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in hidden}
        return RecordedMessages(
            method=self.command,
            path=self._route(),
            headers=headers,
            body=body,
            key_present=present,
            key_matched=matched,
        )

    def _refused(self, request: RecordedMessages) -> bool:
        """Record and answer 404 or 401 for a request to no route or without the key."""
        if request.path in (_MESSAGES, _COUNT_TOKENS) and request.key_matched:
            return False
        self.owner.record(request)
        if request.path not in (_MESSAGES, _COUNT_TOKENS):
            self._send_error(404, "not_found_error", f"no route POST {request.path}")
        else:
            self._send_error(401, "authentication_error", "invalid x-api-key")
        return True

    def _answer(self, request: RecordedMessages, reply: Reply) -> None:
        if reply.fault is Fault.hang:
            self.owner.wait_until_closed()
            self.close_connection = True
            return
        if reply.fault is Fault.server_error:
            self._send_error(500, "api_error", "Internal server error (scripted).")
            return
        if reply.fault is Fault.rate_limited:
            self._send_error(429, "rate_limit_error", "Rate limited (scripted).", retry_after="0")
            return
        assert request.conversation is not None and request.answer_index is not None
        body: dict[str, Any] = request.body
        message_id, tool_ids = self.owner.ids(request.conversation, request.answer_index, reply)
        model, used = str(body.get("model", "")), wire.input_tokens(body)
        if body.get("stream"):
            events = wire.stream_events(
                reply, message_id=message_id, model=model, tool_ids=tool_ids, used_input=used
            )
            self._stream(events, reply)
        elif reply.fault is Fault.drop_connection:
            self._drop()
        else:
            message = wire.message_object(
                reply, message_id=message_id, model=model, tool_ids=tool_ids, used_input=used
            )
            self._send_json(200, message)

    def _stream(self, events: list[tuple[str, dict[str, Any]]], reply: Reply) -> None:
        """Server-sent events in a chunked body; a drop leaves the body incomplete."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        dropping = reply.fault is Fault.drop_connection
        for sent, (name, data) in enumerate(events):
            if dropping and sent >= reply.after_events:
                break
            self._write_chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
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
        with contextlib.suppress(OSError):
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
        self, status: int, kind: str, message: str, *, retry_after: str | None = None
    ) -> None:
        """An error in Anthropic's shape (`{"type": "error", "error": {...}}`)."""
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        payload = {"type": "error", "error": {"type": kind, "message": message}}
        self._send_json(status, payload, headers)
