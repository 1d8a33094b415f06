"""`cairn serve` as a person starts it: the real command, a home made by `cairn init`."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx
import pytest

from acceptance.conftest import CAIRN, Cli
from authority.conftest import cli, strict_home  # noqa: F401  (a home with admin and alice)

pytestmark = pytest.mark.acceptance


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_cairn_serve_answers_with_the_tokens_cairn_printed(cli: Cli) -> None:  # noqa: F811
    cli.room()
    token = cli.json("user", "token", "alice", "--as", "admin")["token"]
    port = _free_port()
    server = subprocess.Popen(
        [str(CAIRN), "serve", "--port", str(port)],
        env=cli.env,
        cwd=cli.tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                assert httpx.get(f"{url}/api/health").json() == {"status": "ok"}
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
                time.sleep(0.1)
        mine = {"Authorization": f"Bearer {token}"}
        assert [r["name"] for r in httpx.get(f"{url}/api/rooms", headers=mine).json()] == ["sample"]
        assert httpx.get(f"{url}/api/rooms").status_code == 401
    finally:
        server.terminate()
        out, err = server.communicate(timeout=20)
    assert token not in out + err and "Traceback" not in err
    cli.assert_private(out + err)


def test_the_cli_loads_no_web_framework_until_serve_runs() -> None:
    # `cairn --help` stays fast: FastAPI and Uvicorn are imported inside `cairn serve` only.
    probe = "import sys, cairn.cli; print(sorted({'fastapi', 'uvicorn'} & set(sys.modules)))"
    done = subprocess.run(
        [str(CAIRN.parent / "python"), "-c", probe], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
