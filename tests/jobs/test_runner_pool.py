"""`cairn serve --workers`: runners in threads, each with its own lease, stopped by one event."""

from __future__ import annotations

from authority.conftest import WRITE_B, team  # noqa: F401
from cairn.jobs.runner_pool import RunnerPool
from cairn.stages import Stage, Status
from cairn.store import jobs as job_ledger
from cairn.store import leases
from cairn.testing.harness import Cairn


def test_stopping_the_pool_hands_back_a_job_a_runner_still_holds(team: Cairn) -> None:  # noqa: F811
    job = team.submit(WRITE_B, actor="admin")
    team.approve(job.id, actor="bob")
    pool = RunnerPool(team.store, team.config, 2)
    assert len({r.runner_id for r in pool.runners}) == 2  # a lease of its own each
    with team.store.begin() as conn:
        held = leases.claim(conn, pool.runners[1].runner_id, 60, job_id=job.id)
    assert held is not None and held.status is Status.running
    pool.stop(timeout=1)  # never started: only the lease is left to hand back
    with team.store.begin() as conn:
        after = job_ledger.get_job(conn, job.id)
    assert (after.status, after.lease_owner) == (Status.queued, None)


def test_the_pools_runners_carry_a_job_to_its_gate_then_stop(team: Cairn) -> None:  # noqa: F811
    job = team.submit(WRITE_B, actor="admin")
    team.approve(job.id, actor="bob")
    pool = RunnerPool(team.store, team.config, 2)
    pool.start()
    try:
        for _ in range(600):
            if team.job(job.id).stage is Stage.awaiting_review:
                break
            pool.stopping.wait(0.1)
    finally:
        pool.stop(timeout=30)
    assert team.job(job.id).stage is Stage.awaiting_review
    assert not any(thread.is_alive() for thread in pool.threads)
