"""SQLite writers wait for each other in cairn's own loop (short looks), up to the busy timeout."""

from __future__ import annotations

import threading
from pathlib import Path

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

    waiting = threading.Thread(target=second)
    waiting.start()
    waiting.join(timeout=0.2)  # it looks again and again while the first holds the lock
    assert waiting.is_alive() and not done
    release.set()
    first.join()
    waiting.join(timeout=30)
    assert done == ["second"]
    with sqlite_store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["first", "second"]
    sqlite_store.close()


def test_a_writer_gives_up_with_database_locked_after_the_busy_timeout(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    held, release = threading.Event(), threading.Event()
    first = threading.Thread(target=_hold_the_lock, args=(sqlite_store, held, release))
    first.start()
    assert held.wait(timeout=30)
    monkeypatch.setattr(database, "SQLITE_BUSY_MS", 50)
    try:
        locked = pytest.raises(sa.exc.OperationalError, match="database is locked")
        with locked, sqlite_store.begin() as conn:
            identity.add_user(conn, "second")
    finally:
        release.set()
        first.join()
    with sqlite_store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["first"]
    sqlite_store.close()
