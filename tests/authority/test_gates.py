"""The two gates and the dependency gate, driven by a real runner under the default policy."""

from __future__ import annotations

import pytest

from cairn.errors import NotAllowed, UsageError
from cairn.jobs import gates
from cairn.jobs.policy import change_policy
from cairn.store import identity
from cairn.store.records import Job
from cairn.testing.harness import Cairn, Turns

from .conftest import ASKS_FOR_RICH, WRITE_B

STRICT_LABEL = "group default: run_approval=admin dependency_approval=admin integration=admin"


def _stage(team: Cairn, job: Job) -> tuple[str, str]:
    found = team.job(job.id)
    return found.stage.value, found.status.value


def test_a_new_job_waits_at_the_run_gate_under_the_default_policy(team: Cairn) -> None:
    job = team.submit(WRITE_B)
    team.work()
    assert _stage(team, job) == ("awaiting_run_approval", "waiting")
    detail = team.detail(job.id)
    assert detail["stages"] == [] and detail["decisions"] == [], "nothing ran, nothing decided"


def test_an_admin_who_requested_a_job_cannot_approve_its_run_but_can_reject_its_pr(
    team: Cairn,
) -> None:
    job = team.submit(WRITE_B, actor="bob")
    team.work()
    with pytest.raises(NotAllowed, match="cannot approve its run, even as an admin"):
        team.approve(job.id, actor="bob")
    assert _stage(team, job) == ("awaiting_run_approval", "waiting")

    team.approve(job.id, actor="admin")
    team.work()
    assert _stage(team, job) == ("awaiting_review", "waiting")
    with pytest.raises(UsageError, match="reason"):
        team.reject(job.id, " ", actor="bob")
    team.reject(job.id, "the helper belongs in utils", actor="bob")

    detail = team.detail(job.id)
    assert (detail["status"], detail["stage"]) == ("rejected", "rejected")
    assert [(d["gate"], d["verdict"], d["actor"], d["reason"]) for d in detail["decisions"]] == [
        ("run", "approved", "admin", None),
        ("integration", "rejected", "bob", "the helper belongs in utils"),
    ]
    assert {d["policy"] for d in detail["decisions"]} == {STRICT_LABEL}
    assert detail["effects"] == [] and team.git("branch", "--list", "cairn/*") == ""


def test_an_admin_may_approve_the_final_pr_of_their_own_request(team: Cairn) -> None:
    job = team.submit(WRITE_B, actor="bob")
    team.work()
    team.approve(job.id, actor="admin")
    team.work()
    team.approve(job.id, actor="bob")
    team.work()
    assert _stage(team, job) == ("completed", "completed")


def test_a_member_cannot_decide_any_gate_but_can_see_the_job(team: Cairn) -> None:
    job = team.submit(ASKS_FOR_RICH, actor="alice")
    team.work()
    seen = []
    for gate_stage in ("awaiting_run_approval", "awaiting_dependency_approval", "awaiting_review"):
        assert _stage(team, job) == (gate_stage, "waiting")
        with pytest.raises(NotAllowed, match="only an admin"):
            team.approve(job.id, actor="alice")
        with pytest.raises(NotAllowed, match="only an admin"):
            team.reject(job.id, "I changed my mind", actor="alice")
        seen.append(team.detail(job.id)["stage"])
        team.approve(job.id, actor="admin")
        team.work()
    assert seen == ["awaiting_run_approval", "awaiting_dependency_approval", "awaiting_review"]
    assert {d["actor"] for d in team.detail(job.id)["decisions"]} == {"admin"}


def test_an_auto_approved_scheduled_run_records_the_policy_it_used(team: Cairn) -> None:
    with team.store.begin() as conn:
        change_policy(conn, "default", "admin", {"run_approval": "auto"}, "nightly jobs")
    scheduled = team.submit(WRITE_B, "nightly: refresh", kind="scheduled")
    interactive = team.submit(WRITE_B, "by hand")
    team.work()

    assert _stage(team, scheduled) == ("awaiting_review", "waiting")
    run = team.detail(scheduled.id)["decisions"][0]
    assert (run["gate"], run["verdict"], run["actor"]) == ("run", "auto", "policy")
    assert run["policy"] == (
        "group default: run_approval=auto(scheduled) dependency_approval=admin integration=admin"
    )
    assert _stage(team, interactive) == ("awaiting_run_approval", "waiting"), (
        "auto applies only to the kinds the policy names"
    )


def test_a_rejected_dependency_reaches_the_agent_with_its_reason(team: Cairn, turns: Turns) -> None:
    job = team.submit(ASKS_FOR_RICH)
    team.work()
    team.approve(job.id)
    team.work()
    team.reject(job.id, "use the standard library's colours")
    team.work()
    assert _stage(team, job) == ("awaiting_review", "waiting")
    notes = turns.notes(job.id)
    assert any("use the standard library's colours" in note for note in notes), notes


def test_member_policy_lets_a_member_decide_the_dependency_gate_only(team: Cairn) -> None:
    with team.store.begin() as conn:
        change_policy(conn, "default", "bob", {"dependency_approval": "member"})
    job = team.submit(ASKS_FOR_RICH, actor="alice")
    team.work()
    team.approve(job.id, actor="admin")
    team.work()
    team.approve(job.id, actor="alice")
    team.work()
    with pytest.raises(NotAllowed, match="only an admin"):
        team.approve(job.id, actor="alice")
    dependency = team.detail(job.id)["decisions"][1]
    assert (dependency["gate"], dependency["actor"]) == ("dependency", "alice")
    assert "dependency_approval=member" in dependency["policy"]


def test_cancel_is_for_the_requester_or_an_admin_and_is_a_decision(team: Cairn) -> None:
    job = team.submit(WRITE_B, actor="bob")
    with team.store.begin() as conn, pytest.raises(NotAllowed, match="requester or an admin"):
        gates.cancel(conn, job.id, "alice")
    with team.store.begin() as conn:
        gates.cancel(conn, job.id, "admin")
    assert team.detail(job.id)["decisions"][-1] | {"at": None} == {
        "gate": "cancel",
        "verdict": "cancelled",
        "actor": "admin",
        "reason": None,
        "policy": None,
        "at": None,
    }
    assert team.work() == [] and _stage(team, job) == ("cancelled", "cancelled")


def test_the_default_policy_is_strict_and_stored(team: Cairn) -> None:
    with team.store.begin() as conn:
        group = identity.get_group(conn, "default")
    assert (
        group.policy
        == identity.DEFAULT_POLICY
        == {
            "run_approval": "admin",
            "auto_approve_kinds": [],
            "dependency_approval": "admin",
            "integration": "admin",
        }
    )
