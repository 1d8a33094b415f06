"""The runners ledger on both backends: entered, heard from, lost, handed back, left."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from cairn.stages import Status
from cairn.store import Store, identity, leases, rooms
from cairn.store import jobs as job_ledger
from cairn.store import runners as runner_ledger
from cairn.store.schema import jobs, runners, utcnow


def _jobs(store: Store, count: int) -> list[int]:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
        room = rooms.create_room(conn, name="r", group_id=group.id, repo="repo", base_branch="m")
        return [
            job_ledger.submit(
                conn, room_id=room.id, requester_id=user.id, text="t", agent={}, scope={}
            ).id
            for _ in range(count)
        ]


def _register(store: Store, runner_id: str, lease: float = 30) -> None:
    with store.begin() as conn:
        runner_ledger.register(
            conn,
            runner_id,
            host="host-a",
            workspace_host="host-a#1",
            pid=4242,
            concurrency=2,
            lease_seconds=lease,
        )


def _listed(store: Store) -> dict[str, runner_ledger.RunnerView]:
    with store.begin() as conn:
        return {row.id: row for row in runner_ledger.list_runners(conn)}


def _age(store: Store, runner_id: str, seconds: float) -> None:
    """Move the runner's last heartbeat `seconds` into the past (a runner gone silent)."""
    with store.begin() as conn:
        beat = conn.execute(sa.select(runners.c.heartbeat_at).where(runners.c.id == runner_id))
        at = beat.scalar_one() - timedelta(seconds=seconds)
        conn.execute(sa.update(runners).where(runners.c.id == runner_id).values(heartbeat_at=at))


def test_a_runner_lists_with_the_jobs_it_holds(store: Store) -> None:
    first, second, free = _jobs(store, 3)
    _register(store, "a")
    _register(store, "b")
    with store.begin() as conn:
        assert leases.claim(conn, "a", 30, job_id=first) is not None
        assert leases.claim(conn, "a", 30, job_id=second) is not None
    shown = _listed(store)
    assert list(shown) == ["a", "b"]
    assert shown["a"].jobs == (first, second) and shown["b"].jobs == ()
    assert (shown["a"].host, shown["a"].pid, shown["a"].concurrency) == ("host-a", 4242, 2)
    assert not shown["a"].lost and shown["a"].started_at <= shown["a"].heartbeat_at
    assert free not in shown["a"].jobs


def test_a_runner_silent_for_a_whole_lease_is_lost_and_a_beat_revives_it(store: Store) -> None:
    _register(store, "a", lease=5)
    _age(store, "a", 4)
    assert not _listed(store)["a"].lost, "silent for less than its lease"
    _age(store, "a", 2)
    assert _listed(store)["a"].lost
    with store.begin() as conn:
        assert runner_ledger.beat(conn, "a")
        assert not runner_ledger.beat(conn, "nobody"), "a beat of a runner not entered"
    assert not _listed(store)["a"].lost


def test_hand_back_requeues_only_that_runners_jobs(store: Store) -> None:
    mine, theirs = _jobs(store, 2)
    with store.begin() as conn:
        held = leases.claim(conn, "a", 30, job_id=mine)
        assert held is not None
        assert leases.claim(conn, "b", 30, job_id=theirs) is not None
        assert runner_ledger.hand_back(conn, "a") == 1
    with store.begin() as conn:
        rows = {r.id: r for r in conn.execute(sa.select(jobs))}
        assert (rows[mine].status, rows[mine].lease_owner) == (Status.queued.value, None)
        assert (rows[theirs].status, rows[theirs].lease_owner) == (Status.running.value, "b")
        # The thread still driving the handed-back job finds its token refused.
        assert not leases.renew(conn, mine, held.fencing_token, 30)


def test_unregister_and_the_forgetting_of_long_lost_runners(store: Store) -> None:
    _register(store, "old")
    _age(store, "old", runner_ledger.FORGET_LOST_AFTER.total_seconds() + 60)
    _register(store, "gone")
    _register(store, "new")  # entering a runner forgets the runners lost long ago
    assert list(_listed(store)) == ["gone", "new"]
    with store.begin() as conn:
        runner_ledger.unregister(conn, "gone")
    assert list(_listed(store)) == ["new"]


def test_time_until_the_next_lease_runs_out(store: Store) -> None:
    past, job, just = _jobs(store, 3)
    with store.begin() as conn:
        assert runner_ledger.seconds_until_a_lease_expires(conn) is None, "nothing running"
        a_minute_ago = utcnow() - timedelta(seconds=60)
        assert leases.claim(conn, "dead", 1, job_id=past, now=a_minute_ago) is not None
    with store.begin() as conn:
        # Claimable already: a runner that left it to another host must not wake for it.
        assert runner_ledger.seconds_until_a_lease_expires(conn) is None, "a lease ran out"
        assert leases.claim(conn, "a", 30, job_id=job) is not None
    with store.begin() as conn:
        until = runner_ledger.seconds_until_a_lease_expires(conn)
    assert until is not None and 0 < until <= 30
    with store.begin() as conn:
        # Ran out a moment ago, perhaps between a runner's claim and its look: due now.
        a_moment_ago = utcnow() - timedelta(seconds=1.05)
        assert leases.claim(conn, "b", 1, job_id=just, now=a_moment_ago) is not None
    with store.begin() as conn:
        assert runner_ledger.seconds_until_a_lease_expires(conn) == 0.0
