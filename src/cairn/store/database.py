"""Engines for the two backends and the migrations that shape them."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from cairn.errors import StoreError
from cairn.next_action import Action, NextAction
from cairn.store import sqlite_transactions

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD_REVISION = "0011"
"""The newest migration, known without Alembic so that opening an up-to-date store (every
command) does not import it; a test checks it against Alembic's own head."""
SQLITE_BUSY_MS = 30_000
POOL_OVERFLOW = 5
PING_AFTER_IDLE_S = 1.0
"""A pooled PostgreSQL connection idle this long is pinged before it is handed out again."""
# psycopg 3 is the PostgreSQL driver either way; a plain postgresql:// URL means it too.
POSTGRES_SCHEMES = ("postgresql:", "postgresql+psycopg:")

NO_STORE = "no cairn store here yet"
INIT_FIRST = (NextAction(Action.init),)
"""What NO_STORE leaves to do: create the store."""
UNREACHABLE = "cannot reach the store; check CAIRN_DATABASE_URL or --home and try again"
DAMAGED = (
    "the store file is not a cairn store (it is damaged, or another file took its name); "
    "restore it from a backup, or point --home / CAIRN_HOME at the right home"
)
READ_ONLY_FILE = (
    "the store file is read-only; make it writable for the user who runs cairn "
    "(chmod u+w), then try again"
)
READ_ONLY_HOME = (
    "cairn's home folder is read-only, and the store writes its journal beside its file; "
    "make the folder writable for the user who runs cairn, then try again"
)


def make_engine(url: str, *, connections: int | None = None) -> Engine:
    """An engine for a sqlite:///, postgresql:// or postgresql+psycopg:// URL, made durable.

    `connections` is how many the caller's threads may hold at once (a runner with
    `--concurrency`); the pool keeps that many and lets a few more open under load.
    """
    pool: dict[str, Any] = {}
    if connections is not None:
        pool = {"pool_size": connections, "max_overflow": POOL_OVERFLOW}
    if url.startswith("sqlite:"):
        return _sqlite_engine(url, pool)
    if url.startswith(POSTGRES_SCHEMES):
        return _postgres_engine("postgresql+psycopg:" + url.split(":", 1)[1], pool)
    raise StoreError("the store URL must be sqlite:///, postgresql:// or postgresql+psycopg://")


def make_reader(url: str, *, connections: int | None = None) -> Engine | None:
    """For a SQLite store file, an engine whose transactions only read and never wait.

    In WAL mode a reader sees the last committed state and blocks nobody, while each
    transaction of `make_engine`'s takes the write lock up front (BEGIN IMMEDIATE). None for
    PostgreSQL, where a transaction takes no lock until it writes (`Store.read` opens its
    transactions READ ONLY on the one pool), and for an in-memory SQLite store, where a
    second engine would open a second, empty store.
    """
    if sqlite_path(url) is None:
        return None
    pool: dict[str, Any] = {}
    if connections is not None:
        pool = {"pool_size": connections, "max_overflow": POOL_OVERFLOW}
    return _sqlite_engine(url, pool, reader=True)


def sqlite_path(url: str) -> Path | None:
    """The file a sqlite:/// URL names, or None for another backend or an in-memory store."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def prepare_sqlite(url: str, *, create: bool) -> None:
    """Check that a SQLite store file can be opened for writing; with `create`, make it private.

    Raises a StoreError saying what is wrong (missing, read-only, uncreatable); nothing for
    other backends.
    """
    path = sqlite_path(url)
    if path is None:
        return
    if not path.exists():
        if not create:
            raise StoreError(NO_STORE, next_actions=INIT_FIRST)
        _create_private(path)
        return
    try:
        # SQLite quietly opens a read-only file read-only, and only the first write would fail.
        os.close(os.open(path, os.O_RDWR))
    except IsADirectoryError:
        raise StoreError(DAMAGED) from None
    except OSError as exc:
        raise StoreError(READ_ONLY_FILE if _denied(exc) else UNREACHABLE) from None


def create_home(folder: Path) -> None:
    """Create cairn's home 0700 (other local users read no job); a StoreError if refused."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(_uncreatable("cairn's home folder", exc)) from None


def _create_private(path: Path) -> None:
    """Create the home (0700) and an empty store file (0600) for SQLite to fill.

    SQLite gives its -wal and -shm files the mode of the store file, so they are private too.
    """
    create_home(path.parent)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass  # another process created it first; it is opened like any existing store
    except OSError as exc:
        raise StoreError(_uncreatable("the store", exc)) from None


def _uncreatable(what: str, exc: OSError) -> str:
    if _denied(exc):
        return (
            f"cannot create {what}: the folder it goes in is read-only; make that folder "
            "writable, or choose another --home / CAIRN_HOME"
        )
    return f"cannot create {what} ({exc.strerror or 'the file system refused'}); check --home"


def describe_failure(url: str, exc: sa.exc.DBAPIError) -> str | None:
    """What is wrong when the database refused to open, with what to do; None if not known."""
    path = sqlite_path(url)
    name = str(getattr(exc.orig, "sqlite_errorname", ""))
    if path is not None and name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return DAMAGED
    if path is not None and name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        if not os.access(path.parent, os.W_OK):
            return READ_ONLY_HOME
        if name.startswith("SQLITE_READONLY"):
            return READ_ONLY_FILE
    return UNREACHABLE if isinstance(exc, sa.exc.OperationalError) else None


def _denied(exc: OSError) -> bool:
    return isinstance(exc, PermissionError) or exc.errno == errno.EROFS


def _postgres_engine(url: str, pool: dict[str, Any]) -> Engine:
    """An engine whose pool replaces a connection the server dropped while it sat idle.

    SQLAlchemy's `pool_pre_ping` pings on every checkout: a round trip as long as the write it
    guards, before every transaction. A connection used a moment ago is known to be alive, so
    only one idle for PING_AFTER_IDLE_S or longer is pinged (a server restart, an idle
    timeout); a dead one is replaced before anyone uses it, as with `pool_pre_ping`.
    """
    engine = sa.create_engine(url, **pool)

    @sa.event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return  # just connected, or in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            if engine.dialect.is_disconnect(exc, dbapi_connection, None):
                raise sa.exc.DisconnectionError() from exc  # the pool connects afresh
            raise

    return engine


def _sqlite_engine(url: str, pool: dict[str, Any], *, reader: bool = False) -> Engine:
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_MS / 1000}, **pool)

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
        if reader:
            cursor.execute("PRAGMA query_only=ON")  # a write through the read door fails loudly
        else:
            cursor.execute("PRAGMA busy_timeout=0")  # the wait is cairn's (sqlite_transactions)
        cursor.close()

    if reader:

        @sa.event.listens_for(engine, "begin")
        def _on_begin(connection: sa.Connection) -> None:
            sqlite_transactions.begin(connection, "BEGIN")

    else:
        sqlite_transactions.take_turns(engine, SQLITE_BUSY_MS / 1000)
    return engine


def _alembic_config(connection: sa.Connection) -> AlembicConfig:
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def _scripts() -> ScriptDirectory:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

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
    # Alembic's own table, read directly: Alembic itself is imported only to migrate.
    with engine.connect() as connection:
        if not sa.inspect(connection).has_table("alembic_version"):
            return None
        versions = connection.execute(sa.text("SELECT version_num FROM alembic_version"))
        return versions.scalar()


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest migration."""
    from alembic import command

    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "head")
