"""`cairn serve` as a person starts it: the real command, a home made by `cairn init`."""

from __future__ import annotations

import signal
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


def _start(cli: Cli, *args: str) -> tuple[subprocess.Popen[str], str]:  # noqa: F811
    port = _free_port()
    server = subprocess.Popen(
        [str(CAIRN), "serve", "--port", str(port), *args],
        env=cli.env,
        cwd=cli.tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/api/health")
            return server, url
        except httpx.TransportError:
            assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
            time.sleep(0.1)


def test_serve_with_workers_runs_jobs_and_stops_cleanly(cli: Cli) -> None:  # noqa: F811
    from authority.conftest import WRITE_B

    cli.room()
    tokens = {n: cli.json("user", "token", n, "--as", "admin")["token"] for n in ("admin", "alice")}
    server, url = _start(cli, "--workers", "2")
    try:
        alice = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['alice']}"})
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['admin']}"})
        job = alice.post("/api/jobs", json={"room": "sample", "request": "b", "script": WRITE_B})
        job_id = job.json()["id"]
        assert admin.post(f"/api/jobs/{job_id}/approve").status_code == 200
        deadline = time.monotonic() + 60
        # No `cairn work` runs: the server's own runners carry the job to review.
        while alice.get(f"/api/jobs/{job_id}").json()["stage"] != "awaiting_review":
            assert time.monotonic() < deadline and server.poll() is None, "no runner took it"
            time.sleep(0.2)
        alice.close()
        admin.close()
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert "2 runners" in out and "Traceback" not in err
    assert all(j["status"] != "running" for j in cli.json("jobs"))
    cli.assert_private(out + err)
