"""The schedules ledger's contract, the same on SQLite and on PostgreSQL (the `store` fixture)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from cairn.errors import NotFound, UsageError
from cairn.store import Store, identity, rooms, schedules
from cairn.store import jobs as job_ledger
from cairn.store.records import FiringOutcome, FiringTrigger, Schedule

AT = datetime(2026, 1, 1, 3, 0, tzinfo=UTC)
AGENT = {"adapter": "script", "script": {"steps": [{"finish": {"summary": "done"}}]}}
RUNNERS = 8


def seed(store: Store, name: str = "nightly") -> Schedule:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
        identity.set_membership(conn, group.id, user.id, "member")
        room = rooms.create_room(conn, name="backend", group_id=group.id, repo="r", base_branch="m")
        return schedules.add(
            conn,
            name=name,
            room_id=room.id,
            cron="0 3 * * *",
            request="Tidy the changelog",
            agent=AGENT,
            requester_id=user.id,
            created_at=AT - timedelta(days=1),
        )


def test_a_schedule_round_trips_by_id_and_by_name(store: Store) -> None:
    added = seed(store)
    with store.begin() as conn:
        assert schedules.get(conn, added.id) == added == schedules.get(conn, "nightly")
        assert schedules.list_schedules(conn) == [added]
    assert added.agent == AGENT and added.created_at == AT - timedelta(days=1)


def test_duplicate_and_invalid_names_are_usage_errors(store: Store) -> None:
    added = seed(store)
    with store.begin() as conn, pytest.raises(UsageError, match="already exists"):
        schedules.add(
            conn,
            name="nightly",
            room_id=added.room_id,
            cron="* * * * *",
            request="x",
            agent=AGENT,
            requester_id=added.requester_id,
        )
    with store.begin() as conn, pytest.raises(UsageError, match="schedule name uses"):
        schedules.add(
            conn,
            name="no spaces",
            room_id=added.room_id,
            cron="* * * * *",
            request="x",
            agent=AGENT,
            requester_id=added.requester_id,
        )


def test_a_fire_time_is_claimed_once(store: Store) -> None:
    added = seed(store)
    with store.begin() as conn:
        first = schedules.claim_firing(conn, added.id, AT, FiringTrigger.cron)
        again = schedules.claim_firing(conn, added.id, AT, FiringTrigger.manual)
        later = schedules.claim_firing(conn, added.id, AT + timedelta(days=1), FiringTrigger.cron)
    assert first is not None and first.outcome is FiringOutcome.pending and first.fire_at == AT
    assert again is None, "the second claim of the same fire time creates nothing"
    assert later is not None and later.id != first.id


def test_settled_firings_name_their_job_or_why_there_is_none(store: Store) -> None:
    added = seed(store)
    with store.begin() as conn:
        job = job_ledger.submit(
            conn,
            room_id=added.room_id,
            requester_id=added.requester_id,
            text=added.request,
            agent=AGENT,
            scope={},
            kind="scheduled",
        )
        made = schedules.claim_firing(conn, added.id, AT, FiringTrigger.cron)
        skipped = schedules.claim_firing(conn, added.id, AT + timedelta(days=1), FiringTrigger.cron)
        assert made is not None and skipped is not None
        made = schedules.settle_firing(conn, made.id, FiringOutcome.created, job_id=job.id)
        skipped = schedules.settle_firing(conn, skipped.id, FiringOutcome.skipped, note="no access")
    with store.begin() as conn:
        assert schedules.firing_of_job(conn, job.id) == made
        assert schedules.last_firing(conn, added.id) == skipped
        assert schedules.earlier_job(conn, added.id, job.id + 1) == job.id
        assert schedules.earlier_job(conn, added.id, job.id) is None
    assert made.job_id == job.id and made.outcome is FiringOutcome.created
    assert skipped.job_id is None and skipped.note == "no access"


def test_remove_drops_the_schedule_and_its_firings(store: Store) -> None:
    added = seed(store)
    with store.begin() as conn:
        schedules.claim_firing(conn, added.id, AT, FiringTrigger.cron)
        schedules.remove(conn, "nightly")
    with store.begin() as conn:
        assert schedules.list_schedules(conn) == []
        assert schedules.last_firing(conn, added.id) is None
        with pytest.raises(NotFound, match="no schedule 'nightly'"):
            schedules.get(conn, "nightly")


def test_concurrent_claims_of_one_fire_time_let_exactly_one_win(
    store: Store, store_url: str
) -> None:
    """Runners each with their own store claim one fire time at the same moment: one wins."""
    added = seed(store)
    start = threading.Barrier(RUNNERS)

    def claim(_: int) -> bool:
        own = Store.open(store_url)
        try:
            start.wait(timeout=30)
            with own.begin() as conn:
                return schedules.claim_firing(conn, added.id, AT, FiringTrigger.cron) is not None
        finally:
            own.close()

    with ThreadPoolExecutor(RUNNERS) as pool:
        won = list(pool.map(claim, range(RUNNERS)))
    assert won.count(True) == 1, won
    with store.begin() as conn:
        last = schedules.last_firing(conn, added.id)
    assert last is not None and last.fire_at == AT
