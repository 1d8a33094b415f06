"""Wake-ups for idle runners: a notification when the store may have work, a poll otherwise.

On PostgreSQL the store itself NOTIFYs channel `cairn_runnable` (a trigger, migration 0011)
in the transaction that makes a job runnable: a new job, a decision, a released lease, a
dependency cache made ready. Notifications are delivered only when that transaction commits,
so a runner never wakes for a write that rolled back. On SQLite, which has no such channel,
a watcher reads `PRAGMA data_version` (it changes when another connection commits) a few
times a second and, when it moved, wakes runners only if a claim would find a job. Either
way a plain poll stays underneath: a lease that simply runs out sends no notification, and
a notification can be lost with its connection.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from cairn.stages import Status
from cairn.store import database
from cairn.store.store import Store

CHANNEL = "cairn_runnable"
"""The channel the store notifies; frozen in migration 0011, which creates the trigger."""
POSTGRES_FALLBACK_SECONDS = 2.0
"""Poll this often although notifications come: for leases that ran out, and lost messages."""
POLL_SECONDS = 0.5
"""The plain poll: on SQLite beside the watcher, and alone where nothing else wakes runners."""
SQLITE_WATCH_SECONDS = 0.05
"""How often the SQLite watcher reads data_version: a read of a counter, no transaction."""
RECONNECT_SECONDS = 1.0

_log = logging.getLogger("cairn.runner")


class _Source(Protocol):
    """Something that calls `wake` whenever the store may have new work."""

    def watch(self, wake: Any, closed: threading.Event) -> None: ...

    def close(self) -> None: ...


class Wakeups:
    """Wakes the idle runner threads of one process; each `waiter()` sees every wake-up once."""

    def __init__(self, fallback_seconds: float, source: _Source | None = None) -> None:
        self.fallback_seconds = fallback_seconds
        self.source = source
        self._changed = threading.Condition()
        self._generation = 0
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        if source is not None:
            self._thread = threading.Thread(
                target=source.watch, args=(self.wake, self._closed), daemon=True
            )
            self._thread.start()

    @property
    def listening(self) -> bool:
        """Whether anything but the poll can wake a runner."""
        return self.source is not None

    def wake(self) -> None:
        """Wake every waiting thread (the store may have work); also for in-process news."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def waiter(self) -> Waiter:
        """A wait for one runner thread, seeing every wake-up from now on exactly once."""
        with self._changed:
            return Waiter(self, self._generation)

    def _wait_past(self, seen: int, timeout: float | None) -> tuple[bool, int]:
        limit = self.fallback_seconds if timeout is None else min(timeout, self.fallback_seconds)
        with self._changed:
            woken = self._changed.wait_for(
                lambda: self._generation != seen or self._closed.is_set(), timeout=limit
            )
            return bool(woken), self._generation

    def close(self) -> None:
        """Stop watching; waiting threads return at once."""
        self._closed.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout=RECONNECT_SECONDS * 2)
        if self.source is not None:
            self.source.close()


class Waiter:
    """One runner thread's wait for work."""

    def __init__(self, wakeups: Wakeups, seen: int) -> None:
        self.wakeups = wakeups
        self.seen = seen

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until woken or the poll interval (or a shorter `timeout`) passes; True if woken.

        A wake-up that came while the thread was busy (between two waits) is not lost: the
        next wait returns at once, so a job made runnable during a claim is claimed next.
        """
        woken, self.seen = self.wakeups._wait_past(self.seen, timeout)
        return woken


class PostgresListener:
    """LISTENs on its own autocommit connection (a pooled one would be handed to others)."""

    def __init__(self, url: str) -> None:
        self.conninfo = url.replace("postgresql+psycopg:", "postgresql:", 1)
        self._conn: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._connect()  # before the runner's first claim, so nothing committed after is missed

    def _connect(self) -> None:
        import psycopg

        conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5)
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()  # refused (a standby, a pooler): the caller polls; no link left open
            raise
        with self._lock:
            kept = not self._closed
            if kept:
                self._conn = conn
        if not kept:  # closed while connecting (a reconnect outlasting `close`)
            conn.close()

    def watch(self, wake: Any, closed: threading.Event) -> None:
        """Wake on every notification; reconnect (and wake, to poll once) if the link drops."""
        import psycopg

        while not closed.is_set():
            conn = self._conn
            try:
                if conn is None:
                    self._connect()
                    wake()  # whatever was notified while disconnected is found by a claim
                    continue
                for _ in conn.notifies(timeout=RECONNECT_SECONDS):
                    wake()
                    if closed.is_set():
                        return
            except psycopg.Error:
                if closed.is_set():
                    return
                if conn is not None:
                    _log.warning("lost the store's notifications; polling until they are back")
                self._disconnect()
                if closed.wait(RECONNECT_SECONDS):
                    return

    def _disconnect(self, *, for_good: bool = False) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self._closed = self._closed or for_good
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        self._disconnect(for_good=True)


class SqliteWatcher:
    """Reads the store file's data_version, which moves when another connection commits."""

    def __init__(self, path: Path) -> None:
        # Opened and read now, before the runner's first claim, so no commit after is missed.
        self._conn = sqlite3.connect(
            path, timeout=database.SQLITE_BUSY_MS / 1000, check_same_thread=False
        )
        self._last = _data_version(self._conn)

    def watch(self, wake: Any, closed: threading.Event) -> None:
        while not closed.wait(SQLITE_WATCH_SECONDS):
            try:
                current = _data_version(self._conn)
            except sqlite3.Error:
                continue  # busy or briefly unreadable: the poll underneath still runs
            if current != self._last:
                self._last = current
                if self._runnable():
                    wake()

    def _runnable(self) -> bool:
        """Whether a claim could find a job now, read without taking the write lock.

        Every commit moves data_version, most of them a busy runner's own progress; waking
        idle runners for each would have them queue for the write lock to claim nothing.
        """
        now = datetime.now(UTC).strftime(_SQLITE_TIMESTAMP)
        try:
            return self._conn.execute(_RUNNABLE_SQL, (now,)).fetchone() is not None
        except sqlite3.Error:
            return True  # unsure: let a claim find out

    def close(self) -> None:
        self._conn.close()  # after the watching thread has stopped


def _listening(url: str) -> Wakeups:
    import psycopg

    try:
        listener = PostgresListener(url)
    except psycopg.Error:
        # A pooler in transaction mode, or a server refusing another connection: poll.
        _log.warning("cannot LISTEN for the store's notifications; polling for work instead")
        return Wakeups(POLL_SECONDS)
    return Wakeups(POSTGRES_FALLBACK_SECONDS, listener)


_SQLITE_TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f"
"""How SQLAlchemy stores a DateTime on SQLite (UTC, as cairn's UTCDateTime writes it)."""
_RUNNABLE_SQL = (
    f"SELECT 1 FROM jobs WHERE status = '{Status.queued.value}' OR (status = "
    f"'{Status.running.value}' AND (lease_expires_at IS NULL OR lease_expires_at < ?)) LIMIT 1"
)
"""The claim's own condition (cairn.store.leases.claim), as one read."""


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def open_wakeups(store: Store, *, listen: bool = True) -> Wakeups:
    """Wake-ups for runners of `store`; without `listen`, the plain poll alone."""
    url = store.engine.url.render_as_string(hide_password=False)
    if store.dialect == "postgresql":
        return Wakeups(POLL_SECONDS) if not listen else _listening(url)
    path = database.sqlite_path(url)
    if not listen or path is None:
        return Wakeups(POLL_SECONDS)
    return Wakeups(POLL_SECONDS, SqliteWatcher(path))
