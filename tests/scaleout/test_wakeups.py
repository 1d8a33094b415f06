"""Wake-ups: the store tells idle runners there may be work, in the transaction that makes it.

On PostgreSQL a trigger NOTIFYs when a job becomes runnable; the notification arrives only if
that transaction commits. On SQLite a watcher sees other connections' commits. Both keep a
plain poll underneath, so a wait always ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cairn.config import Config
from cairn.jobs.concurrency import LEASE_EXPIRY_MARGIN, RunnerProcess
from cairn.stages import Stage, Status
from cairn.store import Store, identity, leases, rooms
from cairn.store import jobs as job_ledger
from cairn.store import wakeups as wakeup_module
from cairn.store.schema import jobs, utcnow
from cairn.store.wakeups import Wakeups, open_wakeups

PATIENCE = 20.0
"""Far longer than any wake-up or poll takes; reached only when a wake-up never comes."""


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Store]:
    opened = Store.open(postgres_url)
    yield opened
    opened.close()


def _submit(store: Store) -> int:
    with store.begin() as conn:
        return _submit_on(conn)


def _submit_on(conn: sa.Connection) -> int:
    """A new job in room `r` (made on first use), in the caller's transaction."""
    user = identity.find_user(conn, "alice")
    if user is None:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
        rooms.create_room(conn, name="r", group_id=group.id, repo="repo", base_branch="main")
    room = rooms.get_room(conn, "r")
    job = job_ledger.submit(
        conn, room_id=room.id, requester_id=user.id, text="t", agent={}, scope={}
    )
    return job.id


class Waiter:
    """One runner thread's wait, run in the background; `woken` says how it ended."""

    def __init__(self, wakeups: Wakeups) -> None:
        self.waiter = wakeups.waiter()
        self.done = threading.Event()
        self.woken: bool | None = None
        self.thread = threading.Thread(target=self._wait, daemon=True)

    def _wait(self) -> None:
        self.woken = self.waiter.wait()
        self.done.set()

    def start(self) -> Waiter:
        self.thread.start()
        return self


def _listening(store: Store) -> Wakeups:
    wakeups = open_wakeups(store)
    wakeups.fallback_seconds = PATIENCE  # only a notification can end a wait in time
    return wakeups


@pytest.mark.postgres
def test_a_new_job_wakes_a_listening_runner_on_postgres(postgres_store: Store) -> None:
    wakeups = _listening(postgres_store)
    try:
        waiter = Waiter(wakeups).start()
        _submit(postgres_store)
        assert waiter.done.wait(PATIENCE), "no wake-up for a new job"
        assert waiter.woken is True
    finally:
        wakeups.close()


@pytest.mark.postgres
def test_a_rolled_back_write_wakes_no_one(postgres_store: Store) -> None:
    wakeups = _listening(postgres_store)
    try:
        wakeups.fallback_seconds = 1.0  # the poll ends this wait: nothing else may
        waiter = Waiter(wakeups).start()
        with pytest.raises(RuntimeError), postgres_store.begin() as conn:
            _submit_on(conn)
            raise RuntimeError("roll back")
        assert waiter.done.wait(PATIENCE)
        assert waiter.woken is False, "a write that rolled back sent a notification"
    finally:
        wakeups.close()


@pytest.mark.postgres
def test_a_decision_and_a_released_lease_each_wake_a_runner(postgres_store: Store) -> None:
    job_id = _submit(postgres_store)
    with postgres_store.begin() as conn:
        job = leases.claim(conn, "r1", 60)
        assert job is not None and job.id == job_id
    wakeups = _listening(postgres_store)
    try:
        waiter = Waiter(wakeups).start()
        with postgres_store.begin() as conn:
            leases.release(conn, job.id, job.fencing_token)
        assert waiter.done.wait(PATIENCE) and waiter.woken, "no wake-up for a released lease"

        with postgres_store.begin() as conn:
            held = leases.claim(conn, "r1", 60)
            assert held is not None
            job_ledger.transition(conn, held, Stage.awaiting_review, Status.waiting)
        waiter = Waiter(wakeups).start()
        with postgres_store.begin() as conn:
            waiting = job_ledger.get_job(conn, job.id)
            job_ledger.transition(conn, waiting, waiting.stage, Status.queued)  # an approval
        assert waiter.done.wait(PATIENCE) and waiter.woken, "no wake-up for a decision"
    finally:
        wakeups.close()


@pytest.mark.postgres
def test_moving_a_job_along_while_it_runs_wakes_no_one(postgres_store: Store) -> None:
    _submit(postgres_store)
    with postgres_store.begin() as conn:
        job = leases.claim(conn, "r1", 60)
        assert job is not None
    wakeups = _listening(postgres_store)
    try:
        wakeups.fallback_seconds = 1.0
        waiter = Waiter(wakeups).start()
        with postgres_store.begin() as conn:
            job_ledger.transition(conn, job, Stage.running_agent, Status.running)
        assert waiter.done.wait(PATIENCE)
        assert waiter.woken is False, "a move that makes nothing runnable woke runners"
    finally:
        wakeups.close()


def test_a_commit_elsewhere_wakes_a_runner_on_sqlite(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, create=True)
    wakeups = _listening(store)
    try:
        waiter = Waiter(wakeups).start()
        other = Store.open(sqlite_url)  # another runner process's connection, in effect
        try:
            _submit(other)
        finally:
            other.close()
        assert waiter.done.wait(PATIENCE), "no wake-up for a commit by another connection"
        assert waiter.woken is True
    finally:
        wakeups.close()
        store.close()


def test_without_listening_a_wait_is_the_plain_poll(store: Store) -> None:
    wakeups = open_wakeups(store, listen=False)
    try:
        assert not wakeups.listening
        waiter = Waiter(wakeups).start()
        assert waiter.done.wait(PATIENCE), "a poll-only wait did not end at its interval"
        _submit(store)
        assert waiter.woken is False
    finally:
        wakeups.close()


def test_a_wake_up_while_a_thread_was_busy_is_not_lost(store: Store) -> None:
    wakeups = open_wakeups(store, listen=False)
    try:
        wakeups.fallback_seconds = PATIENCE
        waiter = wakeups.waiter()  # a runner thread, busy claiming when the wake-up comes
        wakeups.wake()
        assert waiter.wait() is True, "the wake-up that came while it was busy was lost"
        wakeups.fallback_seconds = 0.2
        assert waiter.wait() is False, "one wake-up woke the same thread twice"
    finally:
        wakeups.close()


def test_closing_ends_every_wait_at_once(store: Store) -> None:
    wakeups = _listening(store)
    waiters = [Waiter(wakeups).start() for _ in range(3)]
    wakeups.close()
    assert all(w.done.wait(PATIENCE) for w in waiters)


def _listener_pids(admin: sa.Engine, url: str) -> set[int]:
    name = sa.engine.make_url(url).database
    with admin.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT pid FROM pg_stat_activity WHERE datname = :name AND query LIKE 'LISTEN%'"
            ),
            {"name": name},
        )
        return set(found.scalars())


@pytest.mark.postgres
def test_a_listener_whose_connection_dies_listens_again(
    postgres_store: Store, postgres_url: str, postgres_admin: sa.Engine
) -> None:
    wakeups = _listening(postgres_store)
    try:
        [first] = _listener_pids(postgres_admin, postgres_url)
        with postgres_admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        deadline = threading.Event()
        for _ in range(int(PATIENCE / 0.1)):
            again = _listener_pids(postgres_admin, postgres_url)
            if again and first not in again:
                break
            deadline.wait(0.1)
        else:
            pytest.fail("the listener never connected again")
        waiter = Waiter(wakeups).start()
        _submit(postgres_store)
        assert waiter.done.wait(PATIENCE) and waiter.woken, "no wake-up after reconnecting"
    finally:
        wakeups.close()


@pytest.mark.postgres
def test_a_listener_closed_while_it_reconnects_leaves_no_connection_open(
    postgres_store: Store,
    postgres_url: str,
    postgres_admin: sa.Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    wakeups = _listening(postgres_store)
    connecting, release, reconnected = threading.Event(), threading.Event(), threading.Event()
    connect = psycopg.connect

    def slow_connect(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            # The test's own connections (the admin engine's pool opening one) are not the
            # listener's reconnect: held up here, they stalled the test and set its events.
            return connect(*args, **kwargs)
        connecting.set()
        release.wait(PATIENCE)  # a reconnect that outlasts the runner's shutdown
        conn = connect(*args, **kwargs)
        reconnected.set()
        return conn

    monkeypatch.setattr(psycopg, "connect", slow_connect)
    [first] = _listener_pids(postgres_admin, postgres_url)
    with postgres_admin.connect() as conn:
        conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
    assert connecting.wait(PATIENCE), "the listener never tried to connect again"
    wakeups.close()
    release.set()
    assert reconnected.wait(PATIENCE)
    for _ in range(int(PATIENCE / 0.1)):
        if not _listener_pids(postgres_admin, postgres_url):
            break
        threading.Event().wait(0.1)
    assert not _listener_pids(postgres_admin, postgres_url), "a closed listener kept listening"


@pytest.mark.postgres
def test_a_refused_listen_polls_and_closes_the_connection_it_opened(
    postgres_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from cairn.store import wakeups as wakeups_module

    opened: list[Any] = []
    connect = psycopg.connect

    def recording_connect(*args: Any, **kwargs: Any) -> Any:
        opened.append(connect(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(psycopg, "connect", recording_connect)
    # A LISTEN the server refuses (as a standby does): here, a channel name it cannot parse.
    monkeypatch.setattr(wakeups_module, "CHANNEL", "no such channel")
    wakeups = open_wakeups(postgres_store)
    try:
        assert not wakeups.listening, "a refused LISTEN was taken for a listening runner"
        assert len(opened) == 1
        assert opened[0].closed, "the connection whose LISTEN was refused was left open"
    finally:
        wakeups.close()


def test_on_sqlite_only_a_commit_that_leaves_a_job_claimable_wakes(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, create=True)
    job_id = _submit(store)
    with store.begin() as conn:
        held = leases.claim(conn, "r1", 60)
        assert held is not None and held.id == job_id
    wakeups = _listening(store)
    try:
        wakeups.fallback_seconds = 1.0
        waiter = Waiter(wakeups).start()
        with store.begin() as conn:  # a busy runner's progress: nothing to claim
            job_ledger.transition(conn, held, Stage.running_agent, Status.running)
        assert waiter.done.wait(PATIENCE)
        assert waiter.woken is False, "a commit that left nothing claimable woke runners"

        wakeups.fallback_seconds = PATIENCE
        waiter = Waiter(wakeups).start()
        with store.begin() as conn:  # its lease runs out: claimable by anyone
            past = utcnow() - timedelta(seconds=1)
            conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(lease_expires_at=past))
        assert waiter.done.wait(PATIENCE) and waiter.woken, "no wake-up for an expired lease"
    finally:
        wakeups.close()
        store.close()


def test_an_idle_runner_waits_no_longer_than_the_next_lease_has_left(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease that runs out notifies no one and, on SQLite, moves no data_version: a
    listening runner's idle wait ends when the next lease runs out, not at the next poll. A
    lease already past (a job this runner left to its workspace's host) does not cut the wait
    short, or the runner would claim nothing twenty times a second."""
    left, job = _submit(store), _submit(store)
    with store.begin() as conn:
        a_minute_ago = utcnow() - timedelta(seconds=60)
        assert leases.claim(conn, "a lost runner", 1, job_id=left, now=a_minute_ago) is not None
    asked: list[float | None] = []

    def wait(_waiter: Any, timeout: float | None = None) -> bool:
        asked.append(timeout)
        return False

    monkeypatch.setattr(wakeup_module.Waiter, "wait", wait)
    wakeups = open_wakeups(store)
    try:
        assert wakeups.listening
        idle_wait = RunnerProcess(store, Config(home=tmp_path))._idle_wait(wakeups)
        idle_wait()
        with store.begin() as conn:
            assert leases.claim(conn, "a runner about to die", 0.3, job_id=job) is not None
        idle_wait()
    finally:
        wakeups.close()
    past_only, next_one = asked
    assert past_only is None, "the plain poll"
    assert next_one is not None and next_one <= 0.3 + LEASE_EXPIRY_MARGIN
