"""Leases, fencing tokens and cancellation while a job is held or waiting."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from cairn.errors import LeaseLost, NotAllowed
from cairn.jobs import gates
from cairn.jobs.drive import Drive
from cairn.stages import Stage, Status
from cairn.store import Store, leases
from cairn.store.schema import utcnow
from cairn.testing.harness import Cairn

WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'


def test_a_runner_with_an_old_fencing_token_cannot_write(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B)
    with cairn.store.begin() as conn:
        first = leases.claim(conn, "runner-1", 2)
    with cairn.store.begin() as conn:
        assert leases.claim(conn, "runner-2", 2) is None, "a live lease is not claimable"
        second = leases.claim(conn, "runner-2", 2, now=utcnow() + timedelta(seconds=5))
    assert first is not None and second is not None
    assert second.fencing_token == first.fencing_token + 1
    stale = Drive(cairn.store, cairn.config, first)
    with pytest.raises(LeaseLost):
        stale.move(Stage.preparing_baseline)
    assert cairn.job(job.id).stage is job.stage, "the stale runner's move was refused"
    assert cairn.job(job.id).lease_owner == "runner-2"


def test_a_dead_runners_job_is_finished_by_another(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B)
    with cairn.store.begin() as conn:
        leases.claim(conn, "dead-runner", 0.5)
    cairn.work()
    finished = cairn.job(job.id)
    assert finished.stage is Stage.awaiting_review
    assert finished.fencing_token == 2


def test_cancel_a_waiting_job(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B, actor="bob")
    cairn.work()
    with cairn.store.begin() as conn, pytest.raises(NotAllowed, match="requester or an admin"):
        gates.cancel(conn, job.id, "alice")
    with cairn.store.begin() as conn:
        gates.cancel(conn, job.id, "bob")
    detail = cairn.detail(job.id)
    assert (detail["status"], detail["stage"]) == ("cancelled", "cancelled")
    assert detail["decisions"][-1]["gate"] == "cancel"
    assert cairn.work() == []


def test_cancel_stops_a_runner_that_holds_the_job(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B)
    with cairn.store.begin() as conn:
        held = leases.claim(conn, "runner-1", 30)
    with cairn.store.begin() as conn:
        gates.cancel(conn, job.id, "admin")
    assert held is not None
    drive = Drive(cairn.store, cairn.config, held)
    with pytest.raises(LeaseLost):
        drive.move(Stage.preparing_baseline)
    assert cairn.job(job.id).status is Status.cancelled


def test_two_stores_sharing_a_home_never_share_a_workspace(cairn: Cairn, tmp_path: Path) -> None:
    other = Store.open(f"sqlite:///{tmp_path}/other.db", create=True)
    try:
        assert other.installation_id != cairn.store.installation_id
        mine = cairn.config.workspace_path(cairn.store.installation_id, 1)
        theirs = cairn.config.workspace_path(other.installation_id, 1)
        assert mine != theirs and mine.parent.parent == theirs.parent.parent
    finally:
        other.close()
