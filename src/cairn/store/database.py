"""Engines for the two backends and the migrations that shape them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from cairn.errors import StoreError

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_MS = 30_000


def make_engine(url: str) -> Engine:
    """An engine for a sqlite:/// or postgresql+psycopg:// URL, with cairn's durability settings."""
    if url.startswith("sqlite:"):
        return _sqlite_engine(url)
    if url.startswith("postgresql+psycopg:"):
        return sa.create_engine(url, pool_pre_ping=True)
    raise StoreError("the store URL must be sqlite:/// or postgresql+psycopg://")


def ensure_sqlite_folder(url: str) -> None:
    """Create the folder a SQLite store file will live in (nothing for other backends)."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)


def sqlite_file_missing(url: str) -> bool:
    """Whether `url` names a SQLite file that does not exist (so opening it would create it)."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return False
    return not Path(parsed.database).exists()


def _sqlite_engine(url: str) -> Engine:
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_MS / 1000})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so every transaction can be BEGIN IMMEDIATE:
        # writers queue on the lock up front instead of failing to upgrade a read lock later.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _alembic_config(connection: sa.Connection) -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def _scripts() -> ScriptDirectory:
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config)


def head_revision() -> str:
    """The newest migration this version of cairn knows."""
    head = _scripts().get_current_head()
    assert head is not None
    return head


def is_known_revision(revision: str) -> bool:
    """Whether this version of cairn has a migration called `revision`."""
    return any(script.revision == revision for script in _scripts().walk_revisions())


def current_revision(engine: Engine) -> str | None:
    """The migration the database is at, or None for an empty database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest migration."""
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "head")
