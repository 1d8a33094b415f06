"""The checkpoints and workspace-holder ledgers' contract, with affinity to hosts whose runners
still beat in the runners ledger, on SQLite and PostgreSQL.

Part of the store contract suite (the `store` fixture runs each test on both backends).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from tests.store.test_contract import assert_utc, claimed, submit_jobs

from cairn.errors import LeaseLost
from cairn.jobs.rebuild import roll_back_context
from cairn.stages import Stage, Status
from cairn.store import Store, leases, workspace_hosts
from cairn.store import checkpoints as checkpoint_ledger
from cairn.store import context_steps as conversation
from cairn.store import contexts as context_ledger
from cairn.store import jobs as job_ledger
from cairn.store import runners as runner_ledger
from cairn.store.checkpoints import Checkpoint
from cairn.store.records import ContextStep, Job, StepKind
from cairn.store.schema import runners

BUNDLE = b"# v2 git bundle\n\x00\xff\x10binary after the header\x00"


def checkpoint(store: Store, job: Job, **changes: Any) -> Checkpoint:
    fields: dict[str, Any] = {
        "stage": "running_agent",
        "baseline": "b" * 40,
        "head": "b" * 40,
        "commit": "c" * 40,
        "tree": "t" * 40,
        "bundle": BUNDLE,
        "context_state": {"agent": {"position": 2}, "inbox": []},
        "context_seq": 0,
        "context_step_id": None,
        "context_step_at": None,
        "host": "host-a#1234",
        "fencing_token": job.fencing_token,
    } | changes
    with store.fenced(job.id, job.fencing_token) as conn:
        return checkpoint_ledger.add(conn, job.id, **fields)


def test_a_checkpoint_reads_back_as_written_bundle_bytes_included(store: Store) -> None:
    (submitted,) = submit_jobs(store)
    job = claimed(store)
    written = checkpoint(store, job)
    with store.begin() as conn:
        latest = checkpoint_ledger.latest(conn, job.id)
    assert latest == written and latest is not None
    assert latest.bundle == BUNDLE and isinstance(latest.bundle, bytes)
    assert latest.context_state == {"agent": {"position": 2}, "inbox": []}
    assert (latest.job_id, latest.fencing_token) == (submitted.id, job.fencing_token)
    assert_utc(latest.created_at)


def test_the_latest_checkpoint_is_the_newest_and_jobs_never_share_them(store: Store) -> None:
    one, two = submit_jobs(store, 2)
    first = claimed(store)
    second = claimed(store, "runner-b")
    older = checkpoint(store, first, stage="running_agent")
    newer = checkpoint(store, first, stage="summarizing", head="d" * 40, commit="d" * 40)
    with store.begin() as conn:
        assert checkpoint_ledger.latest(conn, first.id) == newer
        assert checkpoint_ledger.for_job(conn, first.id) == [older, newer]
        assert checkpoint_ledger.latest(conn, second.id) is None
        assert checkpoint_ledger.for_job(conn, second.id) == []
    assert {first.id, second.id} == {one.id, two.id}


def test_a_superseded_runner_cannot_write_a_checkpoint(store: Store) -> None:
    submit_jobs(store)
    stale = claimed(store)
    with store.begin() as conn:
        leases.claim(
            conn, "runner-b", 60, job_id=stale.id, now=datetime.now(UTC) + timedelta(hours=1)
        )
    with pytest.raises(LeaseLost):
        checkpoint(store, stale)
    with store.begin() as conn:
        assert checkpoint_ledger.latest(conn, stale.id) is None


def test_the_holder_of_a_workspace_is_replaced_not_added(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        assert workspace_hosts.holder(conn, job.id) is None
        workspace_hosts.hold(conn, job.id, "host-a")
        assert workspace_hosts.holder(conn, job.id) == "host-a"
        workspace_hosts.hold(conn, job.id, "host-b")
        assert workspace_hosts.holder(conn, job.id) == "host-b"


def _beats(conn: sa.Connection, host: str, at: datetime, lease: float = 10) -> None:
    """A runner of `host` (its workspaces' host), with a lease of `lease` seconds, last heard
    of `at`."""
    runner_id = f"runner-of-{host}-{at.timestamp()}"
    runner_ledger.register(
        conn,
        runner_id,
        host="machine",
        workspace_host=host,
        pid=1,
        concurrency=1,
        lease_seconds=lease,
    )
    conn.execute(sa.update(runners).where(runners.c.id == runner_id).values(heartbeat_at=at))


def _claim_as(store: Store, host: str, now: datetime, wait: float = 30) -> Job | None:
    def defer(conn: sa.Connection, at: datetime) -> Any:
        return workspace_hosts.held_elsewhere(conn, host, at, wait_seconds=wait)

    with store.begin() as conn:
        return leases.claim(conn, f"runner-of-{host}", 60, now=now, defer=defer)


def _queued_on(
    store: Store, holder: str | None, beat: datetime | None, lease: float = 10
) -> tuple[Job, datetime]:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        if holder is not None:
            workspace_hosts.hold(conn, job.id, holder)
        if beat is not None and holder is not None:
            _beats(conn, holder, beat, lease)
        queued = job_ledger.get_job(conn, job.id)
    return queued, queued.updated_at


def test_a_job_waits_for_the_live_host_that_holds_its_workspace(store: Store) -> None:
    job, since = _queued_on(store, "host-a", datetime.now(UTC) + timedelta(hours=1))
    soon = since + timedelta(seconds=1)
    assert _claim_as(store, "host-b", soon) is None, "host B left it to live host A"
    taken = _claim_as(store, "host-a", soon)
    assert taken is not None and taken.id == job.id


def test_a_job_waits_only_a_short_time_for_its_host(store: Store) -> None:
    job, since = _queued_on(store, "host-a", datetime.now(UTC) + timedelta(hours=1))
    taken = _claim_as(store, "host-b", since + timedelta(seconds=31))
    assert taken is not None and taken.id == job.id


def test_a_job_never_waits_for_a_dead_host(store: Store) -> None:
    job, since = _queued_on(store, "host-a", datetime.now(UTC) - timedelta(hours=1))
    taken = _claim_as(store, "host-b", since + timedelta(seconds=1))
    assert taken is not None and taken.id == job.id


def test_a_holders_runner_is_judged_alive_by_its_own_lease(store: Store) -> None:
    # The holder's runner renews every third of a 10-minute lease: a heartbeat 2 minutes
    # old is on time, whatever lease the claiming runner itself was started with.
    job, since = _queued_on(store, "host-a", datetime.now(UTC) + timedelta(hours=1), lease=600)
    soon = since + timedelta(seconds=1)
    with store.begin() as conn:
        conn.execute(sa.update(runners).values(heartbeat_at=soon - timedelta(minutes=2)))
    assert _claim_as(store, "host-b", soon) is None, "host A's runner is not lost"
    # A runner with a 10-second lease last heard of 2 minutes ago is lost.
    with store.begin() as conn:
        conn.execute(sa.update(runners).values(lease_seconds=10))
    taken = _claim_as(store, "host-b", soon)
    assert taken is not None and taken.id == job.id


def test_a_job_no_host_holds_goes_to_any_runner(store: Store) -> None:
    job, since = _queued_on(store, None, None)
    taken = _claim_as(store, "host-b", since + timedelta(seconds=1))
    assert taken is not None and taken.id == job.id


def _converse(store: Store, job: Job, count: int) -> list[ContextStep]:
    ids = []
    with store.fenced(job.id, job.fencing_token) as conn:
        for seq in range(1, count + 1):
            step = conversation.append(
                conn, job.id, job.fencing_token, seq, StepKind.assistant, {"n": seq}
            )
            ids.append(step)
    return ids


def test_rolling_back_a_context_keeps_exactly_the_checkpointed_steps(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    ids = _converse(store, job, 2)
    with store.fenced(job.id, job.fencing_token) as conn:
        context_ledger.save(conn, job.id, "openai", {"agent": {"at": 2}, "inbox": ["old note"]})
    point = checkpoint(
        store, job, context_state={"agent": {"at": 2}, "inbox": ["old note"]},
        context_seq=2, context_step_id=ids[-1].id, context_step_at=ids[-1].at,
    )  # fmt: skip
    with store.fenced(job.id, job.fencing_token) as conn:
        for seq in (3, 4):
            conversation.append(
                conn, job.id, job.fencing_token, seq, StepKind.assistant, {"n": seq}
            )
        state = {"agent": {"at": 4}, "inbox": [], "follow_ups": ["please rename it"]}
        context_ledger.save(conn, job.id, "openai", state)
        roll_back_context(conn, job.id, "openai", point)
    with store.begin() as conn:
        assert [s.seq for s in conversation.steps(conn, job.id)] == [1, 2]
        rolled = context_ledger.load(conn, job.id)
    assert rolled is not None
    assert rolled["agent"] == {"at": 2}
    assert rolled["inbox"] == ["old note"], "a note the lost turn consumed is handed on again"
    assert rolled["follow_ups"] == ["please rename it"], "a person's message is never dropped"


def test_a_conversation_replaced_since_the_checkpoint_is_dropped_whole(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    ids = _converse(store, job, 2)
    point = checkpoint(
        store, job, context_seq=2, context_step_id=ids[-1].id, context_step_at=ids[-1].at
    )
    with store.fenced(job.id, job.fencing_token) as conn:
        conversation.replace(
            conn, job.id, job.fencing_token, [(StepKind.assistant, {"fresh": 1})] * 3
        )
        roll_back_context(conn, job.id, "openai", point)
    with store.begin() as conn:
        assert conversation.steps(conn, job.id) == []


def test_rolling_back_to_no_checkpoint_starts_the_agent_afresh(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    _converse(store, job, 3)
    with store.fenced(job.id, job.fencing_token) as conn:
        context_ledger.save(conn, job.id, "script", {"agent": {"position": 3}, "told": [7]})
        roll_back_context(conn, job.id, "script", None)
    with store.begin() as conn:
        assert conversation.steps(conn, job.id) == []
        rolled = context_ledger.load(conn, job.id)
        assert job_ledger.get_job(conn, job.id).stage is Stage.queued
        assert job_ledger.get_job(conn, job.id).status is Status.running
    assert rolled is not None and rolled["agent"] is None and rolled["told"] == [7]


def test_the_latest_position_can_be_read_without_its_bundle(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    written = checkpoint(store, job)
    with store.begin() as conn:
        light = checkpoint_ledger.latest(conn, job.id, bundle=False)
    assert light is not None and light.bundle == b""
    assert light == written.evolve(bundle=b"")
