"""A sandbox whose only network is its model endpoint, the way Anthropic's sandbox runtime does it.

The sandbox gets a network namespace of its own (`bwrap --unshare-net`: loopback only, no
route anywhere). Outside it, cairn runs an allowlisting HTTP proxy on a Unix socket in a
cairn-owned folder (`egress_proxy`); the folder is bound into the sandbox, and inside it socat
listens on a loopback port and forwards each connection to that socket. Programs inside find
the proxy through HTTPS_PROXY and friends; it relays only to the endpoints' exact host:port.
A loopback endpoint (a local model server) also gets its own port forwarded inside, straight
to it, so its URL works unchanged even for clients that skip proxies for localhost.

    with Egress(["https://api.anthropic.com"], folder) as egress:
        argv = [bwrap, ...sandbox binds..., *egress.bwrap_args, "--", *egress.inner_prefix, cmd]
        env = {...} | egress.environment

The socket folder is bound at a fixed path under the sandbox's own /dev, which bubblewrap
creates writable, so `bwrap_args` work wherever they come after `--dev /dev` (for example just
before the `--` that ends `commands.sandbox_argv`), whatever the sandbox covers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shlex
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from cairn.errors import UsageError, WorkspaceError
from cairn.workspace.commands import INSTALL_HINT
from cairn.workspace.egress_proxy import AllowlistProxy, HostPort, TcpBridge, normal_host

INSIDE_FOLDER = "/dev/cairn-egress"
"""Where the socket folder appears inside the sandbox."""
_PROXY_SOCKET = "proxy.sock"
_FIRST_PROXY_PORT = 3128
_SOCKET_PATH_LIMIT = 100  # sun_path holds 108 bytes on Linux; leave room
_READY_TRIES = 500  # of 10 ms each: socat listens within a few
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
_SOCAT_HINT = (
    "install socat (for example `apt-get install socat`, `dnf install socat` or "
    "`pacman -S socat`) and run the job again"
)


def parse_endpoint(url: str) -> HostPort:
    """(host, port) of an endpoint URL; a clear error for anything but http(s)://host[:port]."""
    shown = "".join(c for c in url.split("@")[-1] if c.isprintable())[:80]
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise UsageError(
            f"the model endpoint {shown!r} is not an http:// or https:// URL with a host; "
            "give one like https://api.example.com or http://127.0.0.1:8000/v1"
        )
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "a model endpoint URL must not carry a user name or password; "
            "give the key in the agent's API key variable instead"
        )
    return normal_host(parts.hostname), port or _DEFAULT_PORTS[parts.scheme]


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine's loopback interface."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Egress:
    """The model-endpoint-only network of one sandboxed run: enter it before starting bwrap."""

    def __init__(self, endpoints: Sequence[str], folder: Path) -> None:
        if isinstance(endpoints, str):
            raise TypeError("endpoints is a list of URLs, not one URL")
        self.endpoints = list(dict.fromkeys(parse_endpoint(url) for url in endpoints))
        if not self.endpoints:
            raise UsageError("a sandbox's egress needs at least one model endpoint URL")
        self.folder = Path(folder).absolute()
        if len(str(self.folder / "direct-65535.sock")) > _SOCKET_PATH_LIMIT:
            raise WorkspaceError(
                "cairn's private folder is too deep for the sandbox's network sockets; "
                "use a shorter CAIRN_HOME path and run the job again"
            )
        self._socat = _required("socat", _SOCAT_HINT)
        _required("bwrap", INSTALL_HINT)
        # Each loopback endpoint's port is forwarded inside as itself; the proxy takes a port
        # none of them uses.
        self._forwarded = sorted({port for host, port in self.endpoints if is_loopback(host)})
        self._forward_to = {
            port: next(hp for hp in self.endpoints if hp[1] == port and is_loopback(hp[0]))
            for port in self._forwarded
        }
        self.proxy_port = next(
            p for p in range(_FIRST_PROXY_PORT, 65536) if p not in self._forwarded
        )
        self._proxy: AllowlistProxy | None = None
        self._bridges: list[TcpBridge] = []
        self._refusals: tuple[str, ...] = ()  # the last run's, kept once it stopped
        self.bwrap_args = ["--unshare-net", "--ro-bind", str(self.folder), INSIDE_FOLDER]
        self.inner_prefix = ["/bin/sh", "-c", self._inner_script(), "cairn-egress"]
        self.environment = self._proxy_environment()

    def __enter__(self) -> Egress:
        if self._proxy is not None:
            raise RuntimeError("this Egress is already running")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder.chmod(0o700)  # cairn's own, holding only these sockets
        _remove_stale_sockets(self.folder)
        try:
            self._proxy = AllowlistProxy(self.folder / _PROXY_SOCKET, set(self.endpoints))
            for port in self._forwarded:
                path = self.folder / f"direct-{port}.sock"
                self._bridges.append(TcpBridge(path, self._forward_to[port]))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        servers = [*self._bridges, *([self._proxy] if self._proxy else [])]
        if self._proxy is not None:
            self._refusals = self._proxy.refusals
        self._proxy, self._bridges = None, []
        for server in servers:
            server.stop()

    @property
    def refusals(self) -> tuple[str, ...]:
        """Why the proxy refused each request it refused (the last 100): for a diagnosis.

        Still there after the run ends, so a turn's outcome can say what it was refused.
        """
        return self._proxy.refusals if self._proxy else self._refusals

    def url_inside(self, url: str) -> str:
        """The URL a program inside the sandbox uses for the endpoint `url`.

        A loopback name becomes 127.0.0.1, where the forwarded port listens inside; any other
        endpoint keeps its URL and is reached through the proxy.
        """
        host, port = parse_endpoint(url)
        if (host, port) not in self.endpoints:
            raise ValueError("the URL is not one of this sandbox's model endpoints")
        if not is_loopback(host):
            return url
        parts = urlsplit(url.strip())
        explicit = f":{parts.port}" if parts.port else ""
        return urlunsplit(parts._replace(netloc=f"127.0.0.1{explicit}"))

    def _inner_script(self) -> str:
        """Start the socat bridges on loopback, wait until they listen, then run the command."""
        bridges = [(self.proxy_port, f"{INSIDE_FOLDER}/{_PROXY_SOCKET}")]
        bridges += [(port, f"{INSIDE_FOLDER}/direct-{port}.sock") for port in self._forwarded]
        lines = ["set -e"]
        for port, path in bridges:
            listen = f"TCP4-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr"
            argv = [self._socat, listen, f"UNIX-CONNECT:{path}"]
            # socat's own complaints name internal paths: they never reach the output.
            lines.append(f"{shlex.join(argv)} </dev/null >/dev/null 2>&1 &")
        # A listening socket shows in the namespace's /proc/net/tcp as local 127.0.0.1:port,
        # state 0A; the address is in host byte order, so both orders are matched.
        loopback = "0100007F" if sys.byteorder == "little" else "7F000001"
        checks = " && ".join(
            f"grep -q ' {loopback}:{port:04X} 00000000:0000 0A ' /proc/net/tcp"
            for port, _ in bridges
        )
        lines += [
            "n=0",
            f"until {checks}; do",
            "  n=$((n + 1))",
            f'  if [ "$n" -gt {_READY_TRIES} ]; then',
            '    echo "cairn could not start the sandbox\'s network bridge" >&2; exit 125',
            "  fi",
            "  sleep 0.01",
            "done",
            'exec "$@"',
        ]
        return "\n".join(lines)

    def _proxy_environment(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.proxy_port}"
        names = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
        env = {name: proxy for name in names} | {name.lower(): proxy for name in names}
        if self._forwarded:
            # Loopback endpoints are forwarded inside as themselves; the rest of loopback
            # is empty, so a client skipping the proxy for it reaches only those.
            env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
        return env


def _remove_stale_sockets(folder: Path) -> None:
    """Remove the sockets a run that was killed (and so never exited) left in `folder`."""
    for path in [folder / _PROXY_SOCKET, *folder.glob("direct-*.sock")]:
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()


def _required(program: str, hint: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise WorkspaceError(
            f"cairn's sandbox reaches the model endpoint through {program}, which is not "
            f"installed; {hint}"
        )
    return found


__all__ = ["INSIDE_FOLDER", "Egress", "is_loopback", "parse_endpoint"]
