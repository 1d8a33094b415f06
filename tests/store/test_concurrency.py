"""Several runners on one store at once, on both backends.

Each thread opens its own `Store` (its own engine and connections), the way separate runner
processes would: on SQLite they share one database file and queue on BEGIN IMMEDIATE; on
PostgreSQL they race through `FOR UPDATE SKIP LOCKED` and the decision chain's unique
`prev_hash`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import sqlalchemy as sa

from cairn.stages import Status
from cairn.store import Store, decisions, identity, leases, rooms
from cairn.store import jobs as job_ledger
from cairn.store.schema import decisions as decisions_table

RUNNERS = 8
JOBS = 40
DECISIONS_PER_RUNNER = 10

T = TypeVar("T")


def run_together(store_url: str, work: Callable[[Store, int], T]) -> list[T]:
    """Run `work(own_store, index)` in RUNNERS threads released at the same moment."""
    start = threading.Barrier(RUNNERS)

    def one(index: int) -> T:
        own = Store.open(store_url)
        try:
            start.wait(timeout=30)
            return work(own, index)
        finally:
            own.close()

    with ThreadPoolExecutor(RUNNERS) as pool:
        return list(pool.map(one, range(RUNNERS)))


def submit_pool(store: Store, count: int) -> list[int]:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
        room = rooms.create_room(conn, name="pool", group_id=group.id, repo="r", base_branch="m")
        return [
            job_ledger.submit(
                conn, room_id=room.id, requester_id=user.id, text=f"t{n}", agent={}, scope={}
            ).id
            for n in range(count)
        ]


def test_concurrent_runners_claim_every_job_exactly_once(store: Store, store_url: str) -> None:
    job_ids = submit_pool(store, JOBS)

    def drain(own: Store, index: int) -> list[tuple[int, str, int]]:
        runner = f"runner-{index}"
        taken = []
        while True:
            with own.begin() as conn:
                job = leases.claim(conn, runner, 300)
            if job is None:
                return taken
            taken.append((job.id, runner, job.fencing_token))

    claims = [claim for taken in run_together(store_url, drain) for claim in taken]

    counts = Counter(job_id for job_id, _, _ in claims)
    assert sorted(counts) == job_ids
    assert set(counts.values()) == {1}
    assert {token for _, _, token in claims} == {1}
    with store.begin() as conn:
        owners = {job.id: job.lease_owner for job in job_ledger.list_jobs(conn)}
        statuses = {job.status for job in job_ledger.list_jobs(conn)}
    assert owners == {job_id: runner for job_id, runner, _ in claims}
    assert statuses == {Status.running}


def test_concurrent_decisions_form_one_chain_without_forks(store: Store, store_url: str) -> None:
    def decide(own: Store, index: int) -> list[int]:
        appended = []
        for n in range(DECISIONS_PER_RUNNER):
            with own.begin() as conn:
                decision = decisions.append(
                    conn, job_id=None, gate="run", verdict="approved", actor=f"a{index}-{n}"
                )
            appended.append(decision.id)
        return appended

    appended = [d for ids in run_together(store_url, decide) for d in ids]

    with store.begin() as conn:
        report = decisions.verify_chain(conn)
        prev_hashes = conn.execute(sa.select(decisions_table.c.prev_hash)).scalars().all()
        actors = conn.execute(sa.select(decisions_table.c.actor)).scalars().all()
    total = RUNNERS * DECISIONS_PER_RUNNER
    assert (report.ok, report.checked, report.broken_id) == (True, total, None)
    assert len(set(appended)) == total
    assert len(prev_hashes) == len(set(prev_hashes)) == total
    assert len(set(actors)) == total
