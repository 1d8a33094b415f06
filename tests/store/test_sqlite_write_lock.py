"""SQLite writers wait for each other in cairn's own loop (short looks), up to the busy timeout."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cairn.store import Store, database, identity


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'cairn.db'}", create=True)


def _hold_the_lock(store: Store, held: threading.Event, release: threading.Event) -> None:
    with store.begin() as conn:
        identity.add_user(conn, "first")
        held.set()
        release.wait(timeout=30)


def test_a_second_writer_waits_for_the_first_and_then_writes(sqlite_store: Store) -> None:
    held, release = threading.Event(), threading.Event()
    first = threading.Thread(target=_hold_the_lock, args=(sqlite_store, held, release))
    first.start()
    assert held.wait(timeout=30)
    done: list[str] = []

    def second() -> None:
        with sqlite_store.begin() as conn:
            identity.add_user(conn, "second")
        done.append("second")

    tries: list[str] = []

    def count(statement: str) -> None:
        if statement == "BEGIN IMMEDIATE":
            tries.append(statement)

    def trace(dbapi_connection: sqlite3.Connection, *_: Any) -> None:
        # What SQLite itself runs: a transaction begins on the driver's own connection.
        dbapi_connection.set_trace_callback(count)

    sa.event.listen(sqlite_store.engine, "checkout", trace)
    waiting = threading.Thread(target=second)
    waiting.start()
    waiting.join(timeout=0.2)
    # A thread of the same process waits for its turn: it never knocks on SQLite's lock.
    assert waiting.is_alive() and not done and tries == []
    release.set()
    first.join()
    waiting.join(timeout=30)
    assert done == ["second"]
    # It looked once its turn came (again if the first's commit still held SQLite's lock).
    assert tries
    with sqlite_store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["first", "second"]
    sqlite_store.close()


def _another_process_holds_the_lock(path: Path) -> sqlite3.Connection:
    """A connection of its own (as another process has) that holds SQLite's write lock."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO users (name, created_at) VALUES ('other', '2026-01-01')")
    return other


def test_a_writer_waits_for_another_processs_lock_and_then_writes(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'cairn.db'}", create=True)
    other = _another_process_holds_the_lock(tmp_path / "cairn.db")
    releasing = threading.Timer(0.3, other.commit)  # well past the shortest looks
    releasing.start()
    try:
        with store.begin() as conn:
            identity.add_user(conn, "second")
    finally:
        releasing.join()
        other.close()
    with store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["other", "second"]
    store.close()


def test_a_writer_gives_up_with_database_locked_after_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "SQLITE_BUSY_MS", 50)  # read when the store's engine is made
    store = Store.open(f"sqlite:///{tmp_path / 'cairn.db'}", create=True)
    other = _another_process_holds_the_lock(tmp_path / "cairn.db")
    try:
        locked = pytest.raises(sa.exc.OperationalError, match="database is locked")
        with locked, store.begin() as conn:
            identity.add_user(conn, "second")
        # Its turn in this process ended with it: the next writer is not held up.
        other.rollback()
        with store.begin() as conn:
            identity.add_user(conn, "third")
    finally:
        other.close()
    with store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["third"]
    store.close()


@pytest.mark.parametrize("door", ["writer", "reader"])
def test_a_transaction_that_cannot_begin_raises_as_sqlalchemy_raises(
    sqlite_store: Store, door: str
) -> None:
    """A transaction begins on the driver's own connection; when it cannot, the error is the
    one SQLAlchemy raises (so its disconnect handling and the store's plain-words errors
    apply), never the driver's bare exception."""
    engine = sqlite_store.engine if door == "writer" else sqlite_store.reader
    assert engine is not None
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.close()  # the driver's connection gone under SQLAlchemy
        with pytest.raises(sa.exc.DBAPIError) as raised:
            conn.begin()
        assert raised.value.connection_invalidated
    with sqlite_store.begin() as conn:  # and the next writer is not held up
        identity.add_user(conn, "next")
    sqlite_store.close()
