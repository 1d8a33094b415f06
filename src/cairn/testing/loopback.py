"""The HTTP server under cairn's fakes: 127.0.0.1 only, and able to stop promptly."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer on a free port of 127.0.0.1 that can close every open connection.

    `owner` is the fake the handlers serve (they reach it as `self.server.owner`).
    """

    daemon_threads = True

    def __init__(self, owner: Any, handler: type[BaseHTTPRequestHandler]) -> None:
        self.owner = owner
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)

    def server_bind(self) -> None:
        # HTTPServer's own looks the address up (getfqdn), which may ask DNS: not on 127.0.0.1.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])
        # A client that gives up between the server's select and its accept (a runner killed
        # mid-request) takes its connection out of the queue: a blocking accept would then
        # wait for the next client, and `shutdown` for ever. Non-blocking, it returns at once.
        self.socket.setblocking(False)

    def get_request(self) -> tuple[socket.socket, Any]:
        request, address = self.socket.accept()
        request.setblocking(True)  # the handlers read and write as on any blocking socket
        return request, address

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut every open connection, waking handlers blocked reading a keep-alive socket."""
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):  # already gone
                connection.shutdown(socket.SHUT_RDWR)
