"""One chat completion over the official `openai` SDK, streamed or not, and what can go wrong.

`ModelClient.complete` returns a whole `ModelAnswer` or raises one of two errors, which the
loop maps to outcomes: `ModelInterrupted` (rule 9: a dropped connection, a stream that ends
without a finish reason, a timeout, a server that keeps failing after the SDK's retries) and
`ModelRefused` (the server will not serve this turn: a wrong key, no such model). A partial
answer is never returned, so it is never saved. The request runs in a worker thread, so a
runner that loses its job stops waiting at once (`ModelStopped`) instead of at the timeout.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai

from cairn.agents.base import Usage
from cairn.sanitize import bound, mask_secret_shapes, strip_control

DEFAULT_TIMEOUT = 300.0
"""Seconds one model request may take, unless the adapter says otherwise."""
MAX_RETRIES = 2
_POLL_SECONDS = 0.1
_SERVER_WORDS = 200


@dataclass(frozen=True)
class ModelCall:
    """One tool call as the model wrote it: its id, tool name and JSON arguments text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelAnswer:
    """A complete answer: its text, its native tool calls, why it stopped, and its cost."""

    content: str | None
    calls: tuple[ModelCall, ...]
    finish_reason: str
    usage: Usage
    prompt_tokens: int = 0


class ModelInterrupted(Exception):
    """The answer was lost on the way (rule 9); `usage` is what the attempt cost."""

    def __init__(self, reason: str, usage: Usage) -> None:
        super().__init__(reason)
        self.usage = usage


class ModelRefused(Exception):
    """The server will not answer this turn; the message is the diagnosis (no key in it)."""

    def __init__(self, diagnosis: str, usage: Usage) -> None:
        super().__init__(diagnosis)
        self.usage = usage


class ModelStopped(Exception):
    """The runner lost the job while waiting for the model."""


Messages = Sequence[Mapping[str, Any]]


class ModelClient:
    """Chat completions against one model of one OpenAI-compatible endpoint."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        key_env: str,
        stream: bool = True,
        temperature: float | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.model = model
        self.stream = stream
        self.temperature = temperature
        self.timeout = timeout
        self._key_env = key_env
        self._sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key, max_retries=MAX_RETRIES, timeout=timeout
        )

    def close(self) -> None:
        """Close the SDK's connections."""
        self._sdk.close()

    def complete(
        self,
        messages: Messages,
        tools: Sequence[Mapping[str, Any]] | None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> ModelAnswer:
        """The model's whole answer to `messages`, offering `tools` (None: no tools at all)."""
        started = time.monotonic()
        box: queue.Queue[ModelAnswer | BaseException] = queue.Queue(maxsize=1)

        def work() -> None:
            try:
                box.put(self._request(messages, tools, started, should_stop))
            except BaseException as error:  # handed to the waiting thread, which raises it
                box.put(error)

        threading.Thread(target=work, name="cairn-model-request", daemon=True).start()
        while True:
            try:
                result = box.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if should_stop():
                    self._sdk.close()  # ends the worker's request; it is abandoned
                    raise ModelStopped from None
                continue
            if isinstance(result, BaseException):
                raise self._mapped(result, _spent(started))
            return result

    def _request(
        self,
        messages: Messages,
        tools: Sequence[Mapping[str, Any]] | None,
        started: float,
        should_stop: Callable[[], bool],
    ) -> ModelAnswer:
        options: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            options["tools"] = list(tools)
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if not self.stream:
            return _whole(self._sdk.chat.completions.create(**options), started)
        chunks = self._sdk.chat.completions.create(
            **options, stream=True, stream_options={"include_usage": True}
        )
        assembled = _Assembly()
        with chunks:
            for chunk in chunks:
                if should_stop():
                    raise ModelStopped
                assembled.add(chunk)
        return assembled.answer(started)

    def _mapped(self, error: BaseException, spent: Usage) -> BaseException:
        """The SDK's error as the loop's: interrupted (rule 9), refused, or itself."""
        if isinstance(error, ModelInterrupted | ModelRefused | ModelStopped):
            return error
        if isinstance(error, openai.APITimeoutError):
            return ModelInterrupted(
                f"the model did not answer within {self.timeout:g} seconds", spent
            )
        if isinstance(error, openai.APIConnectionError):
            return ModelInterrupted("the connection to the model server broke mid-answer", spent)
        if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
            return ModelRefused(
                f"the model server refused the API key (HTTP {error.status_code}); set "
                f"{self._key_env} in the runner's environment to a key it accepts",
                spent,
            )
        if isinstance(error, openai.NotFoundError):
            return ModelRefused(
                f"the model server has no model {self.model!r} (HTTP 404); check the model "
                "name and the base URL (it usually ends in /v1)",
                spent,
            )
        if isinstance(error, openai.RateLimitError | openai.InternalServerError):
            return ModelInterrupted(
                f"the model server kept failing (HTTP {error.status_code}) after "
                f"{MAX_RETRIES} retries",
                spent,
            )
        if isinstance(error, openai.APIStatusError):
            said = bound(mask_secret_shapes(strip_control(str(error.message))), _SERVER_WORDS)
            return ModelRefused(
                f"the model server refused the request (HTTP {error.status_code}): {said}", spent
            )
        if isinstance(error, openai.APIError):
            return ModelInterrupted("the model server's answer could not be read", spent)
        return error


def _spent(started: float, requests: int = 1) -> Usage:
    return Usage(model_requests=requests, seconds=time.monotonic() - started)


def _usage(used: Any, started: float) -> tuple[Usage, int]:
    prompt = int(getattr(used, "prompt_tokens", 0) or 0) if used is not None else 0
    completion = int(getattr(used, "completion_tokens", 0) or 0) if used is not None else 0
    return Usage(1, prompt, completion, time.monotonic() - started), prompt


def _whole(completion: Any, started: float) -> ModelAnswer:
    usage, prompt = _usage(completion.usage, started)
    if not completion.choices:
        raise ModelInterrupted("the model server answered with no choice", usage)
    choice = completion.choices[0]
    if choice.finish_reason is None:
        raise ModelInterrupted("the model's answer ended without a finish reason", usage)
    message = choice.message
    calls = tuple(
        ModelCall(call.id or f"call-{index}", call.function.name, call.function.arguments or "")
        for index, call in enumerate(message.tool_calls or [])
        if getattr(call, "function", None) is not None
    )
    return ModelAnswer(message.content, calls, str(choice.finish_reason), usage, prompt)


class _Assembly:
    """A streamed answer put back together, chunk by chunk."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.used: Any = None

    def add(self, chunk: Any) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.used = chunk.usage
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta is not None and delta.content:
                self.text.append(delta.content)
            for piece in (delta.tool_calls if delta is not None else None) or []:
                call = self.calls.setdefault(
                    self._key(piece), {"id": "", "name": "", "arguments": []}
                )
                call["id"] = piece.id or call["id"]
                if piece.function is not None:
                    call["name"] = piece.function.name or call["name"]
                    call["arguments"].append(piece.function.arguments or "")
            if choice.finish_reason is not None:
                self.finish_reason = str(choice.finish_reason)

    def _key(self, piece: Any) -> int:
        """Which call a streamed piece belongs to: its `index`, or, for servers that stream
        each call whole without one, a new call for each new id or name."""
        if piece.index is not None:
            return int(piece.index)
        latest = max(self.calls, default=None)
        if latest is None:
            return 0
        call = self.calls[latest]
        named = piece.function is not None and bool(piece.function.name)
        if (piece.id and piece.id != call["id"]) or (named and call["name"]):
            return latest + 1
        return latest

    def answer(self, started: float) -> ModelAnswer:
        usage, prompt = _usage(self.used, started)
        if self.finish_reason is None:
            raise ModelInterrupted("the model's stream ended without a finish reason", usage)
        calls = tuple(
            ModelCall(call["id"] or f"call-{index}", call["name"], "".join(call["arguments"]))
            for index, call in sorted(self.calls.items())
        )
        return ModelAnswer("".join(self.text) or None, calls, self.finish_reason, usage, prompt)
