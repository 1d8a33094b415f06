"""PostgreSQL connections the server dropped while they sat idle in the pool are replaced
before use, though a connection used a moment ago is handed out without a ping."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from cairn.store import Store, database
from cairn.store.schema import installation


def drop_server_side(admin: Engine, store: Store) -> None:
    """Terminate every server process of the store's database, as a server restart would."""
    database_name = store.engine.url.database
    with admin.connect() as conn:
        dropped = conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()"
            ),
            {"name": database_name},
        ).all()
    assert dropped, "the store had a pooled connection to drop"


def read(store: Store) -> str:
    with store.begin() as conn:
        return str(conn.execute(sa.select(installation.c.id)).scalar_one())


def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    postgres_admin: Engine, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(postgres_url)
    try:
        first = read(store)
        drop_server_side(postgres_admin, store)
        monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 0.0)
        assert read(store) == first
    finally:
        store.close()


def test_a_connection_used_a_moment_ago_is_not_pinged(
    postgres_admin: Engine, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(postgres_url)
    try:
        read(store)
        drop_server_side(postgres_admin, store)
        monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 3600.0)
        with pytest.raises(sa.exc.OperationalError):
            read(store)  # unpinged, the dead connection fails; the pool then replaces it
        read(store)
    finally:
        store.close()
