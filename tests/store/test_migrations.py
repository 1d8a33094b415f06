"""The migrations build exactly the schema the code declares, with the durability it needs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from cairn.errors import StoreError
from cairn.next_action import Action, NextAction
from cairn.stages import Status
from cairn.store import Store, context_steps, contexts, database, identity, leases, rooms
from cairn.store import jobs as job_ledger
from cairn.store.database import make_engine
from cairn.store.records import Job, StepKind
from cairn.store.schema import metadata


def test_migrated_database_matches_the_declared_schema(store: Store) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        differences = compare_metadata(context, metadata)
    # No exemptions needed: UTCDateTime compares as its impl, DateTime(timezone=True).
    assert differences == []


def test_migrated_database_is_at_the_head_revision(store: Store) -> None:
    assert database.current_revision(store.engine) == database.head_revision()
    with store.engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == database.HEAD_REVISION
    with store.engine.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
    assert tables == set(metadata.tables) | {"alembic_version"}


def test_sqlite_connections_enforce_wal_full_sync_and_foreign_keys(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, create=True)
    try:
        # Every transaction is BEGIN IMMEDIATE, so a second pooled connection is checked out
        # raw (no transaction) while the first is held: the pragmas hold on each of them.
        with store.engine.connect() as pooled:
            raw = store.engine.raw_connection()
            try:
                for pragma in (pooled.exec_driver_sql, raw.cursor().execute):
                    assert pragma("PRAGMA journal_mode").fetchone()[0] == "wal"
                    assert pragma("PRAGMA synchronous").fetchone()[0] == 2
                    assert pragma("PRAGMA foreign_keys").fetchone()[0] == 1
                    # A writer waits for the lock in cairn's own loop, not in SQLite's.
                    assert pragma("PRAGMA busy_timeout").fetchone()[0] == 0
                    assert pragma("PRAGMA query_only").fetchone()[0] == 0
            finally:
                raw.close()
        with store.read() as reading:
            assert reading.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert (
                reading.exec_driver_sql("PRAGMA busy_timeout").scalar() == database.SQLITE_BUSY_MS
            )
            assert reading.exec_driver_sql("PRAGMA query_only").scalar() == 1
    finally:
        store.close()


def test_open_on_an_empty_database_without_create_says_run_cairn_init(
    empty_store_url: str,
) -> None:
    with pytest.raises(StoreError, match="no cairn store here yet") as refused:
        Store.open(empty_store_url)
    assert refused.value.next_actions == (NextAction(Action.init),)  # the CLI: `cairn init`
    created = Store.open(empty_store_url, create=True)
    try:
        assert database.current_revision(created.engine) == database.head_revision()
    finally:
        created.close()


def test_open_without_create_on_a_missing_folder_says_to_run_init(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no cairn store here yet") as refused:
        Store.open(f"sqlite:///{tmp_path}/missing-dir/cairn.db")
    assert refused.value.next_actions == (NextAction(Action.init),)
    assert not (tmp_path / "missing-dir").exists()


def test_open_with_create_makes_the_sqlite_folder(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path}/home/nested/cairn.db", create=True)
    try:
        assert database.current_revision(store.engine) == database.head_revision()
    finally:
        store.close()
    assert (tmp_path / "home" / "nested" / "cairn.db").is_file()


def test_open_refuses_a_url_that_is_neither_sqlite_nor_postgresql() -> None:
    with pytest.raises(StoreError, match=r"sqlite:///, postgresql:// or postgresql\+psycopg://"):
        Store.open("mysql://localhost/cairn")


def test_open_on_a_missing_postgresql_database_says_so(postgres_admin: sa.Engine) -> None:
    url = postgres_admin.url.set(database="cairn_no_such_database").render_as_string(False)
    with pytest.raises(StoreError, match="cannot reach the store"):
        Store.open(url, create=True)


def test_open_on_a_store_from_a_newer_cairn_says_to_upgrade_cairn(
    store: Store, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    opened: list[sa.Engine] = []

    def spy(url: str) -> sa.Engine:
        opened.append(make_engine(url))
        return opened[-1]

    monkeypatch.setattr(database, "make_engine", spy)
    try:
        with pytest.raises(StoreError, match="newer cairn"):
            Store.open(store_url)
    finally:
        for engine in opened:  # the failing open must not leave them open; be sure here
            engine.dispose()


def test_the_head_known_without_alembic_is_alembics_head() -> None:
    # Opening an up-to-date store skips Alembic on this constant: a new migration must move it.
    assert database.head_revision() == database.HEAD_REVISION


def test_a_0001_store_upgrades_to_jobs_with_no_next_actions_and_their_diagnosis_kept(
    store_url: str,
) -> None:
    job = _a_job_in_a_store_at(
        store_url, "0001", then="UPDATE jobs SET diagnosis = 'written by 0001'"
    )
    upgraded = Store.open(store_url)  # an older store is brought to the head on open
    try:
        assert database.current_revision(upgraded.engine) == database.HEAD_REVISION
        with upgraded.begin() as conn:
            before = job_ledger.get_job(conn, job.id)
            assert (before.diagnosis, before.next_actions) == ("written by 0001", ())
            blocked = job_ledger.transition(
                conn,
                before,
                before.stage,
                Status.blocked,
                diagnosis="fix it",
                next_actions=(NextAction(Action.resume, job=job.id),),
            )
        with upgraded.begin() as conn:
            assert job_ledger.get_job(conn, job.id).next_actions == blocked.next_actions
            stored = conn.execute(sa.text("SELECT next_actions FROM jobs")).scalar_one()
        # The structured JSON form (PostgreSQL's driver decodes JSON itself, SQLite's not).
        as_stored = json.loads(stored) if isinstance(stored, str) else stored
        assert as_stored == [{"action": "resume", "job": job.id}]
    finally:
        upgraded.close()


def test_a_0002_store_upgrades_to_an_empty_conversation_ledger_and_keeps_agent_state(
    store_url: str,
) -> None:
    job = _a_job_in_a_store_at(
        store_url, "0002", seed=lambda conn, job: contexts.save(conn, job.id, "script", {"n": 3})
    )
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert not sa.inspect(conn).has_table("context_steps")
    finally:
        engine.dispose()
    upgraded = Store.open(store_url)
    try:
        assert database.current_revision(upgraded.engine) == database.HEAD_REVISION
        with upgraded.begin() as conn:
            assert contexts.load(conn, job.id) == {"n": 3}
            assert context_steps.steps(conn, job.id) == []
            claimed = leases.claim(conn, "runner", 60)
            assert claimed is not None
            step = context_steps.append(
                conn, job.id, claimed.fencing_token, 1, StepKind.request, {"content": "t"}
            )
        assert (step.seq, step.kind) == (1, StepKind.request)
    finally:
        upgraded.close()


def test_a_0003_store_upgrades_to_rooms_without_a_default_and_runs_without_model_requests(
    store_url: str,
) -> None:
    from cairn.store import agents, progress

    job = _a_job_in_a_store_at(
        store_url,
        "0003",
        then="INSERT INTO usage (job_id, agent, run_kind, seconds, input_tokens, output_tokens, "
        "at) VALUES (1, 'script', 'normal', 1.5, 0, 0, '2026-12-01 00:00:00')",
    )
    upgraded = Store.open(store_url)
    try:
        assert database.current_revision(upgraded.engine) == database.HEAD_REVISION
        with upgraded.begin() as conn:
            assert rooms.get_room(conn, job.room_id).default_agent is None
            assert [u.model_requests for u in progress.usage_for_job(conn, job.id)] == [0]
            assert agents.list_agents(conn) == []
            agents.add_agent(conn, "local", {"adapter": "openai", "model": "m"})
            rooms.set_default_agent(conn, job.room_id, "local")
        with upgraded.begin() as conn:
            assert rooms.get_room(conn, job.room_id).default_agent == "local"
    finally:
        upgraded.close()


def _a_job_in_a_store_at(
    store_url: str,
    revision: str,
    *,
    seed: Callable[[sa.Connection, Job], object] | None = None,
    then: str | None = None,
) -> Job:
    """A store holding one job (and what `seed` adds), taken down to an older `revision`."""
    from alembic import command

    store = Store.open(store_url, create=True)
    try:
        with store.begin() as conn:
            job = _a_job(conn)
            if seed is not None:
                seed(conn, job)
        with store.engine.begin() as conn:
            command.downgrade(database._alembic_config(conn), revision)
            if then is not None:
                conn.execute(sa.text(then))  # what the older cairn wrote
        assert database.current_revision(store.engine) == revision
    finally:
        store.close()
    return job


def _a_job(conn: sa.Connection) -> Job:
    group = identity.add_group(conn, "g")
    user = identity.add_user(conn, "alice")
    room = rooms.create_room(conn, name="r", group_id=group.id, repo="/r", base_branch="main")
    return job_ledger.submit(
        conn, room_id=room.id, requester_id=user.id, text="t", agent={}, scope={}
    )
