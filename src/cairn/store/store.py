"""The store: one database, two doors (a plain transaction and a fenced one)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from cairn.errors import LeaseLost, StoreError
from cairn.stages import Status
from cairn.store import database
from cairn.store.schema import installation, jobs, utcnow

_FENCE = (
    sa.update(jobs)
    .where(
        jobs.c.id == sa.bindparam("job"),
        jobs.c.fencing_token == sa.bindparam("token"),
        jobs.c.status == Status.running.value,
    )
    .values(updated_at=sa.bindparam("now"))
)
"""The guard of every fenced transaction, built once: it runs before every fenced write."""


class Store:
    """Owns the engine; ledger functions take the connection a transaction hands out."""

    def __init__(self, engine: Engine, reader: Engine | None = None) -> None:
        self.engine = engine
        self.reader = reader
        """On SQLite, the engine behind `read`: a pool of its own, whose transactions never
        write (see `database.make_reader`)."""

    @classmethod
    def open(cls, url: str, *, create: bool = False, connections: int | None = None) -> Store:
        """Open the store at `url`, migrating it to the newest schema.

        An empty database is created only when `create` is set (`cairn init`), so a mistyped
        home never silently grows a second, empty store. A store that cannot be opened raises
        a StoreError saying what is wrong with it (missing, read-only, damaged, unreachable).
        """
        database.prepare_sqlite(url, create=create)
        pool = {} if connections is None else {"connections": connections}
        engine = database.make_engine(url, **pool)
        try:
            _migrate(engine, create=create)
        except sa.exc.DBAPIError as exc:
            engine.dispose()
            why = database.describe_failure(url, exc)
            if why is None:
                raise
            raise StoreError(why) from exc
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, database.make_reader(url, **pool))

    @cached_property
    def installation_id(self) -> str:
        """This store's identity, written once by its first migration."""
        with self.begin() as connection:
            return installation_of(connection)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self.engine.begin() as connection:
            yield connection

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """One transaction that only reads, from one consistent state of the store.

        On SQLite it takes no write lock, so it neither waits for a runner's write nor holds
        one up. A write through it fails (on PostgreSQL the transaction is READ ONLY; on an
        in-memory SQLite store, which has no second pool, it is a plain transaction). Use
        `begin` for anything that may write.
        """
        if self.reader is not None:
            with self.reader.begin() as connection:
                yield connection
        elif self.dialect == "postgresql":
            with self.engine.connect() as connection:
                # psycopg opens the transaction READ ONLY and REPEATABLE READ (every statement
                # sees the snapshot of the first, which READ COMMITTED would not give); the
                # pool resets both on return. A read-only transaction never fails to serialize.
                connection.execution_options(
                    postgresql_readonly=True, isolation_level="REPEATABLE READ"
                )
                with connection.begin():
                    yield connection
        else:
            with self.engine.begin() as connection:
                yield connection

    @contextmanager
    def fenced(self, job_id: int, fencing_token: int) -> Iterator[sa.Connection]:
        """A transaction that holds only while `fencing_token` is still the job's current token.

        The guard is an UPDATE of the job row, so on PostgreSQL it also takes the row lock:
        a concurrent claim (which bumps the token) waits for this transaction, and a write
        made under a superseded token is refused instead of landing. Only a running job takes
        fenced writes: once it waits at a gate or has ended, its last runner's token is spent.
        """
        with self.engine.begin() as connection:
            guard = connection.execute(
                _FENCE, {"job": job_id, "token": fencing_token, "now": utcnow()}
            )
            if guard.rowcount != 1:
                raise lease_lost(job_id)
            yield connection

    def close(self) -> None:
        if self.reader is not None:
            self.reader.dispose()
        self.engine.dispose()


def lease_lost(job_id: int) -> LeaseLost:
    """The error of a fenced write refused because its token is no longer the job's."""
    return LeaseLost(
        f"job {job_id} is now held by another runner, waits for a person, or has ended; "
        "this runner stopped driving it"
    )


def installation_of(conn: sa.Connection) -> str:
    """The identity of the store that `conn` belongs to, written once by its first migration."""
    return str(conn.execute(sa.select(installation.c.id)).scalar_one())


def _migrate(engine: Engine, *, create: bool) -> None:
    """Bring a cairn store to the newest schema; refuse an empty or a newer one."""
    current = database.current_revision(engine)
    if current == database.HEAD_REVISION:
        return
    if current is None and not create:
        raise StoreError(database.NO_STORE, next_actions=database.INIT_FIRST)
    if current is not None and not database.is_known_revision(current):
        raise StoreError("this store was written by a newer cairn; upgrade cairn to open it")
    if current != database.head_revision():
        database.upgrade(engine)
