"""What every scripted model server shares: per-conversation scripts, the recorded requests,
and a loopback HTTP server in a thread that stops promptly.

The chat-completions, Anthropic Messages and Responses servers differ only in their wire
(their request handler and how a request names its conversation); the bookkeeping is this.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Generic, Protocol, Self, TypeVar

from cairn.testing.loopback import LoopbackServer


class _Recorded(Protocol):
    @property
    def conversation(self) -> str | None: ...


R = TypeVar("R", bound=_Recorded)
A = TypeVar("A")


class ScriptedServer(Generic[R, A]):
    """Scripts (marker -> answers) served on an ephemeral port of 127.0.0.1; thread-safe.

    A subclass sets its own fields, then calls this `__init__` with its request handler,
    which starts serving at once.
    """

    wait_seconds = 30.0
    """How long `wait_for_requests` waits by default."""

    def __init__(
        self,
        scripts: Mapping[str, Sequence[A]],
        handler: type[BaseHTTPRequestHandler],
        *,
        api_key: str | None,
    ) -> None:
        self.api_key = api_key
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified on every recorded request
        self._markers: list[str] = []  # in first-seen order: the index names ids
        self._scripts: dict[str, list[A]] = {}
        self._served: dict[str, int] = {}
        self._requests: list[R] = []
        self._closing = threading.Event()
        for marker, answers in scripts.items():
            self.add_answers(marker, *answers)
        self._http = LoopbackServer(self, handler)
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._http.server_address[1])

    @property
    def requests(self) -> tuple[R, ...]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return tuple(self._requests)

    def wait_for_requests(self, count: int, *, timeout: float | None = None) -> tuple[R, ...]:
        """The requests once at least `count` arrived (a client in another thread or process)."""
        wait = self.wait_seconds if timeout is None else timeout
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self._requests) >= count, wait):
                raise TimeoutError(f"{len(self._requests)} requests arrived, not {count}")
            return tuple(self._requests)

    def requests_for(self, marker: str) -> tuple[R, ...]:
        """The requests that belonged to the conversation `marker`, in arrival order."""
        return tuple(r for r in self.requests if r.conversation == marker)

    def remaining(self, marker: str) -> int:
        """How many answers of `marker`'s script are not served yet."""
        with self._lock:
            return len(self._scripts.get(marker, [])) - self._served.get(marker, 0)

    def add_answers(self, marker: str, *answers: A) -> None:
        """Append answers to `marker`'s script (a new marker starts a new conversation)."""
        if not marker:
            raise ValueError("a conversation marker must not be empty: it would match everything")
        with self._lock:
            if marker not in self._scripts:
                self._markers.append(marker)
                self._scripts[marker] = []
                self._served[marker] = 0
            self._scripts[marker].extend(answers)

    def close(self) -> None:
        """Stop serving: hanging requests end, open connections close."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._http.shutdown()
        self._http.close_connections()
        self._http.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # The handler's side: called from request threads.

    def record(self, request: R) -> None:
        """Keep `request` for the tests."""
        with self._lock:
            self._requests.append(request)
            self._arrived.notify_all()
