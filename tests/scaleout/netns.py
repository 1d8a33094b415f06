"""Network namespaces for the host-loss test: each runner "host" behind a veth pair of its own.

PostgreSQL listens on 127.0.0.1 only, so the root namespace runs a small TCP forwarder on
each veth's root-side address: a host reaches the store only over its veth, as a host on
another machine reaches it over the network.
"""

from __future__ import annotations

import contextlib
import os
import random
import selectors
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

REQUIRE_NETNS = "CAIRN_REQUIRE_NETNS"


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """Why this process cannot make network namespaces here; None when it can."""
    if os.geteuid() != 0:
        return "making network namespaces needs root (CI runs this test as root)"
    probe = f"cairn-probe-{os.getpid()}"
    try:
        made = _ip("netns", "add", probe)
    except FileNotFoundError:
        return "the `ip` command (iproute2) is not installed"
    if made.returncode != 0:
        return f"`ip netns add` is refused here: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


@dataclass
class Namespace:
    """One host's network namespace and the root-side address its store is reached at."""

    name: str
    gateway: str
    """The root namespace's end of the veth: where this host's forwarder listens."""

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{what}: {done.stderr.strip()}")


@contextlib.contextmanager
def namespace(label: str) -> Iterator[Namespace]:
    """A namespace joined to the root one by a veth pair on a /30 of its own."""
    tag = f"{os.getpid() % 10000}{label}{random.randrange(1000)}"
    name, outer, inner = f"cairn-{tag}", f"vc{tag}"[:15], f"vn{tag}"[:15]
    subnet = f"10.{random.randrange(100, 250)}.{random.randrange(256)}"
    gateway, address = f"{subnet}.1", f"{subnet}.2"
    _check(_ip("netns", "add", name), "could not add a network namespace")
    try:
        steps = [
            ("link", "add", outer, "type", "veth", "peer", "name", inner),
            ("link", "set", inner, "netns", name),
            ("addr", "add", f"{gateway}/30", "dev", outer),
            ("link", "set", outer, "up"),
            ("-n", name, "addr", "add", f"{address}/30", "dev", inner),
            ("-n", name, "link", "set", inner, "up"),
            ("-n", name, "link", "set", "lo", "up"),
        ]
        for step in steps:
            _check(_ip(*step), f"could not set up the veth pair ({' '.join(step)})")
        yield Namespace(name, gateway)
    finally:
        _ip("link", "del", outer)  # takes its peer with it
        _ip("netns", "del", name)


class Forwarder:
    """Accepts on `listen` and relays every connection to `target`, both ways."""

    def __init__(self, listen: str, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server((listen, 0))
        self.port = self.server.getsockname()[1]
        self._open: list[socket.socket] = []
        self.relayed = 0
        """Connections relayed so far: proof the host reached the store this way."""
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.relayed += 1
            self._open += [client, upstream]
            threading.Thread(target=_relay, args=(client, upstream), daemon=True).start()

    def close(self) -> None:
        self.server.close()
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.close()


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until both sides have finished, then close both sockets."""
    other = {client: upstream, upstream: client}
    with client, upstream, selectors.DefaultSelector() as selector:
        for sock in other:
            selector.register(sock, selectors.EVENT_READ)
        reading = 2
        with contextlib.suppress(OSError):
            while reading:
                for key, _ in selector.select():
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(65536)
                    if data:
                        other[source].sendall(data)
                        continue
                    selector.unregister(source)
                    reading -= 1
                    other[source].shutdown(socket.SHUT_WR)
