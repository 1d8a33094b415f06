"""Opening the store: both PostgreSQL URL forms, private files, and precise refusals."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cairn.errors import StoreError
from cairn.store import Store, database, identity


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most machines run with (022), which leaves new files readable by everyone."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.postgres
def test_postgresql_urls_with_and_without_the_driver_open_the_same_store(
    postgres_url: str,
) -> None:
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
    assert plain.startswith("postgresql://")
    written = Store.open(plain)
    try:
        assert (written.dialect, written.engine.driver) == ("postgresql", "psycopg")
        with written.begin() as conn:
            identity.add_user(conn, "plain-url")
    finally:
        written.close()
    read = Store.open(postgres_url)
    try:
        with read.begin() as conn:
            assert identity.find_user(conn, "plain-url") is not None
    finally:
        read.close()


@pytest.mark.usefixtures("usual_umask")
def test_a_new_sqlite_store_is_private_to_its_owner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = Store.open(f"sqlite:///{home}/cairn.db", create=True)
    try:
        with store.begin() as conn:
            identity.add_user(conn, "alice")
        # While the store is open its journal files exist; they hold job data as well.
        files = [home / name for name in ("cairn.db", "cairn.db-wal", "cairn.db-shm")]
        assert {path.name: _mode(path) for path in files} == {path.name: 0o600 for path in files}
    finally:
        store.close()
    assert _mode(home) == 0o700


@pytest.mark.usefixtures("usual_umask")
def test_create_home_makes_only_the_home_itself_private(tmp_path: Path) -> None:
    database.create_home(tmp_path / "parent" / "home")
    assert _mode(tmp_path / "parent" / "home") == 0o700
    assert _mode(tmp_path / "parent") == 0o755, "a parent folder is not cairn's to lock"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"these are not the pages you are looking for\n" * 200, id="text"),
        pytest.param(b"SQLite format 3\x00" + b"\xff" * 4080, id="damaged-pages"),
    ],
)
def test_a_file_that_is_not_a_store_is_called_that(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "cairn.db").write_bytes(content)
    with pytest.raises(StoreError) as raised:
        Store.open(f"sqlite:///{tmp_path}/cairn.db")
    assert str(raised.value) == database.DAMAGED
    assert (tmp_path / "cairn.db").read_bytes() == content, "the file is left as it was"


def test_a_folder_where_the_store_file_should_be_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "cairn.db").mkdir()
    with pytest.raises(StoreError) as raised:
        Store.open(f"sqlite:///{tmp_path}/cairn.db")
    assert str(raised.value) == database.DAMAGED


def test_an_unreachable_postgresql_server_is_still_called_unreachable() -> None:
    # Port 9 (discard) on this host: nothing listens, the connection is refused at once.
    with pytest.raises(StoreError) as raised:
        Store.open("postgresql://postgres@127.0.0.1:9/cairn", create=True)
    assert str(raised.value) == database.UNREACHABLE


def test_an_unknown_database_error_is_not_dressed_as_unreachable(sqlite_url: str) -> None:
    refused = sa.exc.IntegrityError("INSERT", {}, Exception("constraint"))
    assert database.describe_failure(sqlite_url, refused) is None
