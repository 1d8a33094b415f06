"""How fast a stage change reaches its SSE subscribers, and how fast the job detail answers.

A home is made with the real CLI (`cairn init`, a room on a sample repository, an admin
token) and served by the real `cairn serve` in a process of its own, on loopback. For each
subscriber count (1, 100 and 1,000 by default) this:

1. submits a fresh job (it waits at the run gate) and opens that many concurrent
   `GET /api/jobs/{id}/events` streams, waiting until every one has received the job's
   backlog (so each is connected and caught up);
2. cancels the job through the API, noting the time just before the request;
3. records, per subscriber, when the `cancelled` event arrived.

and prints p50 and p99 of those delays, and how long it took for every subscriber to see it.
It then measures requests per second of `GET /api/jobs/{id}` from 8 concurrent clients, with
no subscriber connected and with the largest subscriber count connected.

    .venv/bin/python benchmarks/sse_fanout.py [--subscribers 1,100,1000] [--seconds 5]

The clients run in this process (asyncio over httpx), the server in another; on the project's
2-core machine both share the cores, so the figures are a floor for what loopback allows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent
CAIRN = BIN / "cairn"
SCRIPT = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _home(folder: Path) -> tuple[dict[str, str], str]:
    """A home made with the real CLI: its environment and the admin's token."""
    from cairn.testing.repos import make_sample_repo

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "GIT_"))}
    env |= {"CAIRN_HOME": str(folder / "home"), "NO_COLOR": "1"}
    repo = make_sample_repo(folder / "repo")

    def cairn(*args: str) -> str:
        done = subprocess.run([str(CAIRN), *args], env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"cairn {args[0]} failed: {done.stderr}")
        return done.stdout

    cairn("init")
    cairn("room", "create", "sample", "--repo", str(repo))
    token = json.loads(cairn("user", "token", "admin", "--json"))["token"]
    return env, token


def _serve(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    server = subprocess.Popen(
        [str(CAIRN), "serve", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/api/health")
            return server, url
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("cairn serve did not start") from None
            time.sleep(0.1)


async def _new_job(client: httpx.AsyncClient) -> int:
    """A job that waits at the run gate (the strict policy of a plain `cairn init`)."""
    body = {"room": "sample", "request": "r", "script": SCRIPT}
    made = await client.post("/api/jobs", json=body)
    made.raise_for_status()
    return int(made.json()["id"])


async def _subscriber(
    client: httpx.AsyncClient, job: int, ready: asyncio.Event, arrived: list[float]
) -> None:
    """Follow the job's stream: say when caught up, note when `cancelled` arrives."""
    async with client.stream("GET", f"/api/jobs/{job}/events") as stream:
        async for line in stream.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if event["status"] == "waiting":
                ready.set()
            if event["status"] == "cancelled":
                arrived.append(time.perf_counter())
                return


async def _fan_out(url: str, token: str, count: int) -> tuple[list[float], float]:
    """Delays (s) from the cancel request to each subscriber's `cancelled` event."""
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=120
    ) as client:
        job = await _new_job(client)
        arrived: list[float] = []
        readies = [asyncio.Event() for _ in range(count)]
        started = time.perf_counter()
        tasks = [asyncio.create_task(_subscriber(client, job, ready, arrived)) for ready in readies]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), timeout=300)
        connect = time.perf_counter() - started
        sent = time.perf_counter()
        answer = await client.post(f"/api/jobs/{job}/cancel")
        answer.raise_for_status()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
    return [t - sent for t in arrived], connect


async def _detail_rps(url: str, token: str, seconds: float, clients: int = 8) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        job = await _new_job(client)
        done = 0
        until = time.perf_counter() + seconds

        async def one() -> None:
            nonlocal done
            while time.perf_counter() < until:
                (await client.get(f"/api/jobs/{job}")).raise_for_status()
                done += 1

        await asyncio.gather(*(one() for _ in range(clients)))
    return done / seconds


async def _rps_while_subscribed(url: str, token: str, count: int, seconds: float) -> float:
    """Job-detail requests per second while `count` streams follow a waiting job."""
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=120
    ) as client:
        job = await _new_job(client)
        readies = [asyncio.Event() for _ in range(count)]
        tasks = [asyncio.create_task(_subscriber(client, job, r, [])) for r in readies]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), timeout=300)
        rps = await _detail_rps(url, token, seconds)
        await client.post(f"/api/jobs/{job}/cancel")
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
    return rps


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", default="1,100,1000")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    counts = [int(n) for n in args.subscribers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        env, token = _home(Path(tmp))
        server, url = _serve(env)
        try:
            print(f"{'subscribers':>11}  {'p50 ms':>8}  {'p99 ms':>8}  {'all ms':>8}  connect s")
            for count in counts:
                delays, connect = asyncio.run(_fan_out(url, token, count))
                assert len(delays) == count, f"{count - len(delays)} subscribers saw nothing"
                print(
                    f"{count:>11}  {_pct(delays, 0.5) * 1000:>8.1f}  "
                    f"{_pct(delays, 0.99) * 1000:>8.1f}  {max(delays) * 1000:>8.1f}  "
                    f"{connect:>8.2f}"
                )
            idle = asyncio.run(_detail_rps(url, token, args.seconds))
            busy = asyncio.run(_rps_while_subscribed(url, token, max(counts), args.seconds))
            print(f"GET /api/jobs/{{id}}: {idle:.0f} req/s (8 clients, no stream open)")
            print(f"GET /api/jobs/{{id}}: {busy:.0f} req/s with {max(counts)} streams open")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
