"""A TCP server on 127.0.0.1 that accepts connections and never says a word.

It stands in for an address that never answers (a firewalled host, a dead VPN), so tests of
git timeouts send no traffic beyond this machine.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class SilentServer:
    """Accepts every connection on `port`, reads and discards, never writes."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._connections: list[socket.socket] = []
        self._closed_by_peer: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def accepted(self) -> int:
        """How many connections came in so far."""
        with self._lock:
            return len(self._connections)

    def all_hung_up(self, within: float) -> bool:
        """Whether every client that connected has closed its end, waiting up to `within` s."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with self._lock:
                if len(self._closed_by_peer) == len(self._connections):
                    return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            self._closed = True
            for connection in self._connections:
                connection.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._connections.append(connection)
                if self._closed:
                    connection.close()
                    return
            threading.Thread(target=self._drain, args=(connection,), daemon=True).start()

    def _drain(self, connection: socket.socket) -> None:
        try:
            while connection.recv(65536):
                pass
        except OSError:
            return  # closed by this side
        with self._lock:
            self._closed_by_peer.add(id(connection))
        connection.close()


@contextmanager
def silent_server() -> Iterator[SilentServer]:
    """A `SilentServer` for the duration of the block."""
    server = SilentServer()
    try:
        yield server
    finally:
        server.close()
