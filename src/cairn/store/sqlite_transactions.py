"""How cairn's SQLite transactions begin: each straight on the driver's connection (`begin`),
and a writer's so that it takes SQLite's one write lock: one thread of a process at a time,
looking again at short intervals while another process holds it.

Every transaction of the writer pool is BEGIN IMMEDIATE: it takes the lock up front, so a
writer never fails to upgrade a read later. SQLite's own busy handler sleeps 1, 2, 5, 10 ms
and longer between looks, long after a runner's write of about a millisecond has ended, so the
connections' busy timeout is 0 and BEGIN IMMEDIATE is tried again here after 0.1 ms, then
twice as long each time up to 2 ms, until the same busy timeout. Threads of one process
(`cairn work --concurrency N`) queue on a lock of the process instead of each looking too,
which would cost CPU (and the GIL) for nothing: only one thread per process looks.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

FIRST_PAUSE_S = 0.0001
LONGEST_PAUSE_S = 0.002
_HOLDS = "cairn_holds_the_write_turn"
"""Set in a pooled connection's info while its transaction holds this process's write turn."""


def take_turns(engine: Engine, busy_seconds: float) -> None:
    """Make every transaction of `engine` BEGIN IMMEDIATE, one thread of this process at a
    time, waiting at most `busy_seconds` for the lock."""
    turn = threading.Lock()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        info = connection.connection.info
        deadline = time.monotonic() + busy_seconds
        # The same connection beginning again before its turn ended already holds it.
        if not info.get(_HOLDS) and turn.acquire(timeout=busy_seconds):
            info[_HOLDS] = True
        try:
            _begin_immediate(connection, deadline)
        except BaseException:
            _end_turn(info, turn)
            raise

    @sa.event.listens_for(engine, "commit")
    def _on_commit(connection: sa.Connection) -> None:
        # Just before the commit itself: another thread's BEGIN IMMEDIATE may find SQLite's
        # lock held for the moment the commit takes, and looks again.
        _end_turn(connection.connection.info, turn)

    @sa.event.listens_for(engine, "rollback")
    def _on_rollback(connection: sa.Connection) -> None:
        _end_turn(connection.connection.info, turn)

    @sa.event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        _end_turn(record.info, turn)  # a transaction that ended without either


def _end_turn(info: dict[str, Any], turn: threading.Lock) -> None:
    if info.pop(_HOLDS, False):
        turn.release()


def begin(connection: sa.Connection, statement: str) -> None:
    """Begin the transaction of `connection` with `statement`, straight on SQLite's connection.

    Every transaction begins so: through SQLAlchemy's statement execution it costs a third of
    a read. An error is raised as SQLAlchemy raises it (the statement tried once more through
    SQLAlchemy), so callers see the same errors either way.
    """
    try:
        _driver(connection).execute(statement)
    except sqlite3.Error:
        connection.exec_driver_sql(statement)


def _driver(connection: sa.Connection) -> Any:
    """The sqlite3 connection under `connection`."""
    driver = connection.connection.dbapi_connection
    assert driver is not None, "a connection that begins a transaction is open"
    return driver


def _begin_immediate(connection: sa.Connection, deadline: float) -> None:
    """BEGIN IMMEDIATE, looking again at short, growing intervals while another process's
    writer holds the lock, until `deadline` (then SQLite's "database is locked")."""
    pause = FIRST_PAUSE_S
    driver = _driver(connection)
    while time.monotonic() < deadline:
        try:
            driver.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.Error as exc:
            # Only SQLITE_BUSY and its extended codes (a writer, a recovery, a snapshot in use)
            # are waited out; any other error is raised by the last look, wrapped.
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY:
                break
        time.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE_S)
    begin(connection, "BEGIN IMMEDIATE")  # the last look, raising as SQLAlchemy raises
