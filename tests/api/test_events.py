"""SSE progress: stage changes in order, only `{job, stage, status, seq}`, resumable."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx

from authority.conftest import WRITE_B
from cairn.api.event_hub import EventHub
from cairn.store.progress import events_for_job

from .conftest import Api


def _read(client: httpx.Client, path: str, count: int, last: str | None = None) -> list[Any]:
    """The first `count` SSE messages of `path` as (id, data) pairs."""
    headers = {"Last-Event-ID": last} if last else {}
    got: list[Any] = []
    with client.stream("GET", path, headers=headers) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        seen: dict[str, str] = {}
        for line in stream.iter_lines():
            if line.startswith(("id:", "data:")):
                key, _, value = line.partition(":")
                seen[key] = value.strip()
            elif not line and "data" in seen:
                got.append((seen["id"], json.loads(seen["data"])))
                seen = {}
                if len(got) == count:
                    break
    return got


def test_stage_changes_arrive_in_order_and_a_reconnect_misses_none(api: Api) -> None:
    alice, bob = api.client("alice"), api.client("bob")
    job = alice.post(
        "/api/jobs", json={"room": "sample", "request": "b", "script": api.script(WRITE_B)}
    )
    job_id = job.json()["id"]
    with api.team.store.begin() as conn:
        before = len(events_for_job(conn, job_id))
    bob.post(f"/api/jobs/{job_id}/approve")
    worker = threading.Thread(target=api.team.work)
    worker.start()
    worker.join()
    with api.team.store.begin() as conn:
        ledger = events_for_job(conn, job_id)
    assert len(ledger) > before + 3
    streamed = _read(alice, f"/api/jobs/{job_id}/events", len(ledger))
    assert [data for _, data in streamed] == [
        {"job": job_id, "stage": e.stage.value, "status": e.status.value, "seq": e.id}
        for e in ledger
    ]
    assert [int(seq) for seq, _ in streamed] == [e.id for e in ledger]
    middle = streamed[2][0]
    rest = _read(alice, f"/api/jobs/{job_id}/events", len(ledger) - 3, last=middle)
    assert rest == streamed[3:]
    in_room = _read(alice, "/api/rooms/1/events", len(ledger))
    assert in_room == streamed


def test_a_stream_delivers_what_happens_after_it_opened(api: Api) -> None:
    alice, bob = api.client("alice"), api.client("bob")
    job_id = alice.post(
        "/api/jobs", json={"room": "sample", "request": "b", "script": api.script(WRITE_B)}
    ).json()["id"]
    with api.team.store.begin() as conn:
        known = events_for_job(conn, job_id)
    got: list[Any] = []
    reader = threading.Thread(
        target=lambda: got.extend(
            _read(alice, f"/api/jobs/{job_id}/events", 2, last=str(known[-1].id))
        )
    )
    reader.start()
    bob.post(f"/api/jobs/{job_id}/approve")
    api.team.work()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert [data["seq"] for _, data in got] == sorted(data["seq"] for _, data in got)
    assert all(
        data["seq"] > known[-1].id and set(data) == {"job", "stage", "status", "seq"}
        for _, data in got
    )


def test_streams_are_only_for_members(api: Api) -> None:
    job_id = (
        api.client("alice")
        .post("/api/jobs", json={"room": "sample", "request": "b", "script": api.script(WRITE_B)})
        .json()["id"]
    )
    assert api.client(None).get(f"/api/jobs/{job_id}/events").status_code == 401
    assert api.client("carol").get(f"/api/jobs/{job_id}/events").status_code == 403
    assert api.client("carol").get("/api/rooms/1/events").status_code == 403
    assert api.client("alice").get("/api/jobs/424242/events").status_code == 404


def test_one_poller_hands_each_stream_only_its_own_jobs_events(api: Api) -> None:
    """Many streams open at once: each gets its job's change, and no other job's."""
    alice, bob = api.client("alice"), api.client("bob")
    body = {"room": "sample", "request": "b", "script": api.script(WRITE_B)}
    jobs = [alice.post("/api/jobs", json=body).json()["id"] for _ in range(3)]
    # Each stream: the job's two recorded events, then the rejection that comes after.
    got: dict[int, list[Any]] = {}
    readers = [
        threading.Thread(
            target=lambda j=j: got.__setitem__(j, _read(alice, f"/api/jobs/{j}/events", 3))
        )
        for j in jobs
    ]
    room: list[Any] = []
    room_reader = threading.Thread(target=lambda: room.extend(_read(bob, "/api/rooms/1/events", 9)))
    for reader in (*readers, room_reader):
        reader.start()
    for job in jobs:
        assert bob.post(f"/api/jobs/{job}/reject", json={"reason": "no"}).status_code == 200
    for reader in (*readers, room_reader):
        reader.join(timeout=60)
    for job in jobs:
        assert {data["job"] for _, data in got[job]} == {job}
        assert got[job][-1][1]["status"] == "rejected"
    assert sorted(data["job"] for _, data in room) == sorted(jobs * 3)
    assert [int(seq) for seq, _ in room] == sorted(int(seq) for seq, _ in room)


def test_an_event_recorded_right_after_subscribing_is_delivered(api: Api) -> None:
    """The hub's starting point is fixed when `subscribe` returns, not when its poller first
    runs: an event recorded in between (after the stream read its backlog) reaches it."""
    team = api.team
    job = team.submit(WRITE_B, actor="alice")

    async def first_event_after_subscribing() -> int:
        hub = EventHub(team.store)
        subscription = await hub.subscribe(lambda routed: True)
        try:
            team.reject(job.id, "no", actor="bob")  # before the poller has run at all
            event = await asyncio.wait_for(subscription.queue.get(), 30)
            assert event is not None
            return event.job
        finally:
            hub.unsubscribe(subscription)

    assert asyncio.run(first_event_after_subscribing()) == job.id
