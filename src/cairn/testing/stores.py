"""Throwaway cairn stores on SQLite and PostgreSQL, for tests.

PostgreSQL databases are cloned from one migrated template (`CREATE DATABASE ... TEMPLATE`),
the way procrastinate's suite does, so a test pays for a CREATE DATABASE, not a migration.
SQLite stores are likewise byte copies of one migrated file (`migrated_sqlite_template`).
The server is `POSTGRES_SERVER` unless CAIRN_TEST_POSTGRES names another one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from cairn.store import Store

POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
POSTGRES_SERVER_VARIABLE = "CAIRN_TEST_POSTGRES"
REQUIRE_POSTGRES = "CAIRN_REQUIRE_POSTGRES"
"""Set to 1 (CI) to fail, not skip, the PostgreSQL variants when the server is unreachable."""


def postgres_server(environ: Mapping[str, str] = os.environ) -> str:
    """The test server's URL without a database name."""
    return environ.get(POSTGRES_SERVER_VARIABLE, POSTGRES_SERVER).rstrip("/")


def postgres_database_url(name: str, server: str | None = None) -> str:
    """The URL of database `name` on the test server."""
    return f"{server or postgres_server()}/{name}"


def unique_database_name(prefix: str) -> str:
    """A database name no other test process picks: prefix, pid and a random part."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def admin_engine(server: str | None = None) -> tuple[Engine, str | None]:
    """An AUTOCOMMIT engine on the server's `postgres` database, and why it is unreachable."""
    url = postgres_database_url("postgres", server)
    engine = sa.create_engine(
        url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:
        engine.dispose()
        return engine, f"PostgreSQL is unreachable at {url}: {exc.orig}".strip()
    return engine, None


def create_database(admin: Engine, name: str, template: str | None = None) -> None:
    """CREATE DATABASE `name`, cloned from `template` when given."""
    clause = f" TEMPLATE {template}" if template else ""
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"{clause}'))


def drop_database(admin: Engine, name: str) -> None:
    """DROP DATABASE `name`, closing whatever still holds it."""
    with admin.connect() as connection:
        connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def migrated_template(admin: Engine) -> str:
    """A new database on the test server holding cairn's migrated schema, to clone per test."""
    name = unique_database_name("cairn_tmpl")
    create_database(admin, name)
    try:
        Store.open(postgres_database_url(name), create=True).close()
    except BaseException:
        drop_database(admin, name)
        raise
    return name


def migrated_sqlite_template(folder: Path) -> Path:
    """A SQLite store file in `folder` holding cairn's migrated schema, to copy per test."""
    path = folder / "template.db"
    Store.open(f"sqlite:///{path}", create=True).close()  # closing checkpoints the WAL
    return path


def copy_sqlite_store(template: Path, path: Path) -> str:
    """Copy the migrated `template` to `path`, private as `cairn init` makes it; its URL."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as copy:
        copy.write(template.read_bytes())
    return f"sqlite:///{path}"
