"""Root fixtures: a cairn store on SQLite and on PostgreSQL, for every test folder.

Reusable fixtures (request them by name from any test under `tests/`):

- `store_url`: a URL for a fresh, migrated store, parametrized "sqlite" and "postgres".
- `store`: `Store.open(store_url, create=True)`, closed after the test.
- `sqlite_url` / `postgres_url`: one backend only. The PostgreSQL database is fresh and already
  migrated; the SQLite file does not exist yet (`Store.open(url, create=True)` makes it).
- `empty_store_url`: a reachable but empty database (no cairn tables), on both backends.
- `postgres_admin`: an AUTOCOMMIT engine on the server's `postgres` database.
- `package_downloads`: one download cache for uv and npm, shared by the whole session (each
  installation still builds its own dependency cache entries; only downloads are shared).

PostgreSQL must listen on 127.0.0.1:5432 with trust auth. When it does not, the "postgres"
variants are skipped, unless CAIRN_REQUIRE_POSTGRES=1 (CI), where they fail instead.
Each PostgreSQL test gets its own database cloned from one migrated template per session,
the way procrastinate's suite does, so a test pays for a CREATE DATABASE, not a migration.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from cairn.store import Store

POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
POSTGRES_ADMIN_URL = f"{POSTGRES_SERVER}/postgres"
REQUIRE_POSTGRES = "CAIRN_REQUIRE_POSTGRES"

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def postgres_database_url(name: str) -> str:
    """The URL of database `name` on the test server."""
    return f"{POSTGRES_SERVER}/{name}"


def _unique_database_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session", autouse=True)
def package_downloads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package managers' download cache for every cairn installation of the session."""
    folder = tmp_path_factory.mktemp("package-downloads")
    # Also for installations configured from the environment (the CLI, `cairn demo`).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAIRN_PACKAGE_DOWNLOADS", str(folder))
        yield folder


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    """An AUTOCOMMIT engine on the `postgres` database; skips (or fails) when unreachable."""
    engine = sa.create_engine(
        POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    unreachable = None
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:
        unreachable = f"PostgreSQL is unreachable at {POSTGRES_ADMIN_URL}: {exc.orig}".strip()
    if unreachable is not None:  # outside the except block, so the report is just the reason
        engine.dispose()
        if os.environ.get(REQUIRE_POSTGRES) == "1":
            pytest.fail(f"{REQUIRE_POSTGRES}=1 but {unreachable}", pytrace=False)
        pytest.skip(unreachable)
    yield engine
    engine.dispose()


def _create_database(admin: Engine, name: str, template: str | None = None) -> None:
    clause = f" TEMPLATE {template}" if template else ""
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"{clause}'))


def _drop_database(admin: Engine, name: str) -> None:
    with admin.connect() as connection:
        connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_template(postgres_admin: Engine) -> Iterator[str]:
    """The name of a database migrated once per session, cloned by every `postgres_url`."""
    name = _unique_database_name("cairn_tmpl")
    _create_database(postgres_admin, name)
    try:
        Store.open(postgres_database_url(name), create=True).close()
        yield name
    finally:
        _drop_database(postgres_admin, name)


@pytest.fixture
def postgres_url(postgres_admin: Engine, postgres_template: str) -> Iterator[str]:
    """A fresh migrated PostgreSQL store of its own, dropped after the test."""
    name = _unique_database_name("cairn_test")
    _create_database(postgres_admin, name, template=postgres_template)
    yield postgres_database_url(name)
    _drop_database(postgres_admin, name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite store file in the test's temporary directory (migrated by `Store.open`)."""
    return f"sqlite:///{tmp_path}/cairn.db"


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh store URL on each backend in turn."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open, migrated store on each backend in turn."""
    opened = Store.open(store_url, create=True)
    yield opened
    opened.close()


@pytest.fixture(params=BACKENDS)
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A reachable database holding no cairn tables yet, on each backend in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    admin: Engine = request.getfixturevalue("postgres_admin")
    name = _unique_database_name("cairn_empty")
    _create_database(admin, name)
    yield postgres_database_url(name)
    _drop_database(admin, name)
