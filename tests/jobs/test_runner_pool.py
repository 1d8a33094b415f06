"""`cairn serve --workers`: a runner process working in the background, stopped by one call."""

from __future__ import annotations

import threading

from authority.conftest import WRITE_B, team  # noqa: F401
from cairn.jobs.concurrency import RunnerProcess
from cairn.stages import Stage, Status
from cairn.store import jobs as job_ledger
from cairn.store import leases
from cairn.testing.harness import Cairn


def test_stopping_the_runners_hands_back_a_job_one_still_holds(team: Cairn) -> None:  # noqa: F811
    job = team.submit(WRITE_B, actor="admin")
    team.approve(job.id, actor="bob")
    runners = RunnerProcess(team.store, team.config, concurrency=2)
    with team.store.begin() as conn:
        held = leases.claim(conn, runners.runner_id, 60, job_id=job.id)
    assert held is not None and held.status is Status.running
    runners.stop(timeout=1)  # never started: only the lease is left to hand back
    with team.store.begin() as conn:
        after = job_ledger.get_job(conn, job.id)
    assert (after.status, after.lease_owner) == (Status.queued, None)


def test_background_runners_carry_a_job_to_its_gate_then_stop(team: Cairn) -> None:  # noqa: F811
    job = team.submit(WRITE_B, actor="admin")
    team.approve(job.id, actor="bob")
    runners = RunnerProcess(team.store, team.config, concurrency=2)
    runners.start()
    try:
        for _ in range(600):
            if team.job(job.id).stage is Stage.awaiting_review:
                break
            threading.Event().wait(0.1)
    finally:
        runners.stop(timeout=30)
    assert team.job(job.id).stage is Stage.awaiting_review
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("runner"))
