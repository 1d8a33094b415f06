"""The run gate is decided by `submit` itself, in the transaction that creates the job."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from cairn.agents.registry import load_agent_spec
from cairn.jobs.policy import change_policy
from cairn.jobs.submit import retry_job, submit_job
from cairn.sanitize import Sanitizer
from cairn.stages import Stage, Status
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_user
from cairn.store.rooms import get_room
from cairn.store.schema import decisions, jobs
from cairn.testing.harness import Cairn

from .conftest import WRITE_B


def _at(team: Cairn, job_id: int) -> tuple[Stage, Status]:
    job = team.job(job_id)
    return job.stage, job.status


def _gate_decisions(team: Cairn, job_id: int) -> list[tuple[str, str, str]]:
    return [(d["gate"], d["verdict"], d["actor"]) for d in team.detail(job_id)["decisions"]]


def test_a_submitted_job_waits_at_the_run_gate_before_any_runner_looks(team: Cairn) -> None:
    job = team.submit(WRITE_B)
    assert (job.stage, job.status) == (Stage.awaiting_run_approval, Status.waiting)
    events = [(e["stage"], e["status"]) for e in team.detail(job.id)["events"]]
    assert events == [("queued", "queued"), ("awaiting_run_approval", "waiting")]

    approved = team.approve(job.id, actor="admin")  # no runner has run yet
    assert (approved.stage, approved.status) == (Stage.awaiting_run_approval, Status.queued)
    team.work()
    assert _at(team, job.id) == (Stage.awaiting_review, Status.waiting)
    assert _gate_decisions(team, job.id)[0] == ("run", "approved", "admin")


def test_a_kind_the_policy_approves_is_approved_in_the_submit_transaction(team: Cairn) -> None:
    with team.store.begin() as conn:
        change_policy(conn, "default", "admin", {"run_approval": "auto"})
    job = team.submit(WRITE_B, kind="scheduled")
    assert (job.stage, job.status) == (Stage.awaiting_run_approval, Status.queued)
    (run,) = team.detail(job.id)["decisions"]
    assert (run["gate"], run["verdict"], run["actor"]) == ("run", "auto", "policy")
    assert run["policy"].startswith("group default: run_approval=auto(scheduled)")
    team.work()
    assert _at(team, job.id) == (Stage.awaiting_review, Status.waiting)
    assert _gate_decisions(team, job.id).count(("run", "auto", "policy")) == 1, "decided once"


def test_a_failed_submit_leaves_neither_job_nor_decision(team: Cairn) -> None:
    with team.store.begin() as conn:
        change_policy(conn, "default", "admin", {"run_approval": "auto"})
        before = conn.execute(sa.select(sa.func.count()).select_from(decisions)).scalar()
    with pytest.raises(RuntimeError), team.store.begin() as conn:
        submit_job(
            conn,
            room="sample",
            text="nightly",
            agent={"adapter": "script", "steps": []},
            actor="alice",
            sanitizer=Sanitizer(),
            kind="scheduled",
        )
        raise RuntimeError("the caller's transaction fails after the submit")
    with team.store.begin() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(jobs)).scalar() == 0
        after = conn.execute(sa.select(sa.func.count()).select_from(decisions)).scalar()
    assert after == before, "the auto decision shares the job's transaction"


def test_a_retry_meets_the_run_gate_at_once_too(team: Cairn) -> None:
    job = team.submit(WRITE_B)
    team.reject(job.id, "not this way")
    with team.store.begin() as conn:
        again = retry_job(conn, job.id, "alice")
    assert (again.stage, again.status) == (Stage.awaiting_run_approval, Status.waiting)
    team.approve(again.id, actor="bob")
    team.work()
    assert _at(team, again.id) == (Stage.awaiting_review, Status.waiting)


@pytest.mark.parametrize("auto", [False, True], ids=["admin", "auto"])
def test_a_runner_still_gates_a_job_left_at_queued_by_an_older_cairn(
    team: Cairn, auto: bool
) -> None:
    if auto:
        with team.store.begin() as conn:
            change_policy(conn, "default", "admin", {"run_approval": "auto"})
    script = team.tmp / "left-queued.yaml"
    script.write_text(WRITE_B)
    with team.store.begin() as conn:
        # An older cairn stored the job at `queued` and left the run gate to a runner.
        job = job_ledger.submit(
            conn,
            room_id=get_room(conn, "sample").id,
            requester_id=get_user(conn, "alice").id,
            text="left queued",
            agent=load_agent_spec(f"script:{script}"),
            scope={},
            kind="scheduled",
        )
    assert (job.stage, job.status) == (Stage.queued, Status.queued)
    team.work(job.id)
    if auto:
        assert _at(team, job.id) == (Stage.awaiting_review, Status.waiting)
        assert _gate_decisions(team, job.id) == [("run", "auto", "policy")]
    else:
        assert _at(team, job.id) == (Stage.awaiting_run_approval, Status.waiting)
        assert _gate_decisions(team, job.id) == []
