"""The outside half of a sandbox's egress: an allowlisting HTTP proxy and plain TCP bridges.

Both listen on Unix sockets in a cairn-owned folder that is bound into the sandbox, whose own
network namespace has nothing but loopback; socat inside turns a loopback port into a
connection to one of these sockets.

- `AllowlistProxy` accepts `CONNECT host:port` (https) and absolute-form `http://` requests,
  and only for the exact host and port of an allowed endpoint. Anything else gets a 403 with a
  one-line reason. Request headers and bodies are relayed, never logged or echoed.
- `TcpBridge` forwards every connection to one fixed host and port (a loopback endpoint, so a
  client that bypasses proxies for localhost still reaches it).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import socketserver
import threading
from collections.abc import Set
from pathlib import Path
from urllib.parse import urlsplit

_HEAD_LIMIT = 64 * 1024  # a request head longer than this is refused, never buffered whole
_CONNECT_TIMEOUT = 10.0
_PIECE = 64 * 1024
# Hop-by-hop headers the proxy answers itself instead of passing on.
_DROPPED = frozenset({b"proxy-authorization", b"proxy-connection", b"connection", b"keep-alive"})

HostPort = tuple[str, int]


class Refused(Exception):
    """A request the proxy does not relay: its status and the one-line reason it sends."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def normal_host(host: str) -> str:
    """A host as the allowlist compares it: lower case, no brackets, no trailing dot."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.removesuffix(".")


def split_authority(authority: str, default_port: int | None) -> HostPort:
    """(host, port) of `host:port` (`[v6]:port`), refusing userinfo and anything malformed."""
    if not authority or "@" in authority or any(c in authority for c in " \t/\\?#"):
        raise Refused(400, "the proxy takes a plain host:port, without user names or paths")
    host, sep, port_text = authority.rpartition(":")
    if not sep or (host.startswith("[") != host.endswith("]")) or ("]" in port_text):
        host, port_text = authority, ""  # no port given (or a bare IPv6 literal)
    if not port_text:
        if default_port is None:
            raise Refused(400, "a CONNECT request must name a port")
        port = default_port
    elif port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise Refused(400, "the request names an invalid port")
    host = normal_host(host)
    if not host:
        raise Refused(400, "the request names no host")
    return host, port


def _same_host(a: str, b: str) -> bool:
    """Whether two hosts are the same, IP literals compared as addresses."""
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


class _Relay:
    """Copies bytes both ways between two sockets until both directions are done.

    One thread a direction: a single thread blocked sending one way could wait forever on a
    peer that is itself blocked sending the other way (HTTP/2 in a tunnel does both at once).
    """

    def __init__(self, one: socket.socket, other: socket.socket) -> None:
        self.one, self.other = one, other

    def run(self) -> None:
        back = threading.Thread(target=_copy, args=(self.other, self.one), daemon=True)
        back.start()
        _copy(self.one, self.other)
        back.join()


def _copy(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until it ends, then pass the half-close on."""
    try:
        while data := source.recv(_PIECE):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        # Either side reset or the server stopped: end both directions.
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    """A threading Unix-socket server that closes every open connection when it stops."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, path: Path, handler: type[socketserver.BaseRequestHandler]) -> None:
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(str(path), handler)
        # The owner's alone. Not by umask: that is the whole process's, and other threads of
        # the runner write files meanwhile. Until the chmod, the folder (0700) keeps others out.
        os.chmod(path, 0o600)
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def track(self, sock: socket.socket) -> None:
        """Remember a socket (client or upstream) to close when the server stops."""
        with self._open_lock:
            self._open.add(sock)

    def forget(self, sock: socket.socket) -> None:
        """Close a socket that `track` remembered."""
        with self._open_lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        self.track(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def stop(self) -> None:
        """Stop accepting, end every relay, and remove the socket file."""
        self.shutdown()
        with self._open_lock:
            connections = list(self._open)
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.server_close()
        self._thread.join()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.server_address)  # type: ignore[arg-type]


class TcpBridge(_UnixServer):
    """Forwards each connection on its Unix socket to `target`, byte for byte."""

    def __init__(self, path: Path, target: HostPort) -> None:
        self.target = target
        super().__init__(path, _BridgeHandler)


class _BridgeHandler(socketserver.BaseRequestHandler):
    server: TcpBridge

    def handle(self) -> None:
        try:
            upstream = socket.create_connection(self.server.target, timeout=_CONNECT_TIMEOUT)
        except OSError:
            return  # the client sees its connection close, as with nothing listening
        upstream.settimeout(None)
        self.server.track(upstream)
        try:
            _Relay(self.request, upstream).run()
        finally:
            self.server.forget(upstream)


class AllowlistProxy(_UnixServer):
    """An HTTP proxy on a Unix socket that relays only to the exact `allowed` host:ports."""

    def __init__(self, path: Path, allowed: Set[HostPort]) -> None:
        self.allowed = frozenset((normal_host(host), port) for host, port in allowed)
        self._refusals: list[str] = []
        self._refusals_lock = threading.Lock()
        super().__init__(path, _ProxyHandler)

    @property
    def refusals(self) -> tuple[str, ...]:
        """The reasons of the requests refused so far (at most the last 100)."""
        with self._refusals_lock:
            return tuple(self._refusals)

    def note_refusal(self, reason: str) -> None:
        """Keep a refusal's reason (never the request) for diagnosis and tests."""
        with self._refusals_lock:
            self._refusals = [*self._refusals[-99:], reason]

    def check(self, target: HostPort) -> None:
        """Refuse (403) any host:port that is not exactly one of the allowed endpoints."""
        host, port = target
        if not any(_same_host(host, h) and port == p for h, p in self.allowed):
            raise Refused(
                403, f"{_shown(host)}:{port} is not the model endpoint this sandbox may reach"
            )


def _shown(host: str) -> str:
    """A host for a one-line reason: printable, short, brackets for IPv6."""
    clean = "".join(c for c in host if c.isprintable())[:100]
    return f"[{clean}]" if ":" in clean else clean


class _ProxyHandler(socketserver.BaseRequestHandler):
    server: AllowlistProxy

    def handle(self) -> None:
        try:
            head, rest = _read_head(self.request)
            if not head:
                return  # connected and closed without a request (a readiness probe)
            target, upstream_head = _parse(head)
            self.server.check(target)
        except Refused as refused:
            self.server.note_refusal(refused.reason)
            _send_status(self.request, refused.status, refused.reason)
            return
        except OSError:
            return
        self._relay(target, upstream_head, rest)

    def _relay(self, target: HostPort, upstream_head: bytes | None, rest: bytes) -> None:
        try:
            upstream = socket.create_connection(target, timeout=_CONNECT_TIMEOUT)
        except OSError:
            reason = f"the model endpoint {_shown(target[0])}:{target[1]} did not accept"
            _send_status(self.request, 502, reason)
            return
        upstream.settimeout(None)
        self.server.track(upstream)
        try:
            if upstream_head is None:  # CONNECT: the tunnel is open
                self.request.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                upstream.sendall(upstream_head)
            if rest:
                upstream.sendall(rest)
            _Relay(self.request, upstream).run()
        except OSError:
            pass
        finally:
            self.server.forget(upstream)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The request head (through the blank line) and whatever arrived after it."""
    sock.settimeout(_CONNECT_TIMEOUT)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _HEAD_LIMIT:
            raise Refused(431, "the request head is too long")
        piece = sock.recv(_PIECE)
        if not piece:
            if data:
                raise Refused(400, "the request ended before its head did")
            return b"", b""
        data += piece
    sock.settimeout(None)
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _parse(head: bytes) -> tuple[HostPort, bytes | None]:
    """The target of a request head, and the head to send upstream (None for CONNECT)."""
    try:
        lines = head.decode("latin-1").split("\r\n")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise Refused(400, "the request head is not text") from None
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(400, "the proxy takes only HTTP/1 requests")
    method, target_text, version = parts
    headers = [_header(line) for line in lines[1:]]
    if method == "CONNECT":
        return split_authority(target_text, None), None
    url = urlsplit(target_text)
    if url.scheme.lower() != "http" or not target_text.lower().startswith("http://"):
        raise Refused(400, "the proxy takes CONNECT for https and absolute http:// URLs only")
    target = split_authority(url.netloc, 80)
    hosts = [value for name, value in headers if name == b"host"]
    if len(hosts) > 1 or (hosts and split_authority(hosts[0].decode("latin-1"), 80) != target):
        raise Refused(400, "the request's Host header does not match its URL")
    path = target_text[len("http://") + len(url.netloc) :]
    path = path if path.startswith("/") else f"/{path}"
    kept = [
        f"{name.decode()}: ".encode() + value for name, value in headers if name not in _DROPPED
    ]
    if not hosts:
        kept.insert(0, f"Host: {url.netloc}".encode())
    # One request per upstream connection: a second one on the same client connection could
    # otherwise name another host and still reach this one.
    request_line = f"{method} {path} {version}".encode("latin-1")
    return target, b"\r\n".join([request_line, *kept, b"Connection: close", b"", b""])


def _header(line: str) -> tuple[bytes, bytes]:
    name, sep, value = line.partition(":")
    if not sep or not name or name != name.strip():
        raise Refused(400, "the request has a malformed header")
    return name.lower().encode("latin-1"), value.strip().encode("latin-1")


def _send_status(sock: socket.socket, status: int, reason: str) -> None:
    """A short plain-text answer that closes the connection; it never echoes the request."""
    phrases = {400: "Bad Request", 403: "Forbidden", 431: "Too Large", 502: "Bad Gateway"}
    body = f"cairn's sandbox proxy: {reason}\n".encode()
    answer = (
        f"HTTP/1.1 {status} {phrases.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    with contextlib.suppress(OSError):
        sock.sendall(answer)
