"""Access is verified again on every resume and at every gate; lost access blocks the job."""

from __future__ import annotations

import pytest

from cairn.errors import NotAllowed
from cairn.jobs import gates
from cairn.jobs.policy import change_policy
from cairn.store import identity
from cairn.store.rooms import get_room, rebind_room
from cairn.testing.harness import Cairn, Turns
from cairn.testing.repos import make_sample_repo

from .conftest import ASKS_FOR_RICH, WRITE_B


def _at_dependency_gate(team: Cairn) -> int:
    job = team.submit(ASKS_FOR_RICH, actor="alice")
    team.work()
    team.approve(job.id)
    team.work()
    assert team.job(job.id).stage.value == "awaiting_dependency_approval"
    return job.id


def _set_alice(team: Cairn, member: bool) -> None:
    with team.store.begin() as conn:
        group = identity.get_group(conn, "default")
        alice = identity.get_user(conn, "alice")
        if member:
            identity.set_membership(conn, group.id, alice.id, "member")
        else:
            identity.remove_membership(conn, group.id, alice.id)


def _workspace_has(team: Cairn, job_id: int, name: str) -> bool:
    path = team.workspace(job_id)
    return (path / name).exists()


def test_removing_the_requester_at_the_dependency_gate_blocks_the_job_instead_of_running_it(
    team: Cairn, turns: Turns
) -> None:
    job_id = _at_dependency_gate(team)
    handed = len(turns.of(job_id))
    _set_alice(team, member=False)

    blocked = team.approve(job_id, actor="admin")
    detail = team.detail(job_id)
    assert (detail["status"], detail["stage"]) == ("blocked", "awaiting_dependency_approval")
    assert blocked.status.value == "blocked"
    assert "requester alice is no longer a member of group default" in detail["diagnosis"]
    assert [d["gate"] for d in detail["decisions"]] == ["run"], "the approval was not recorded"
    assert detail["dependency_requests"][0]["status"] == "pending"
    assert team.work() == [], "no runner picks up a blocked job"
    assert len(turns.of(job_id)) == handed, "the agent was handed no further turn"
    assert not _workspace_has(team, job_id, "a2.txt")

    with team.store.begin() as conn, pytest.raises(NotAllowed, match="no longer a member"):
        gates.resume(conn, job_id, "admin")
    _set_alice(team, member=True)
    with team.store.begin() as conn:
        resumed = gates.resume(conn, job_id, "alice")
    assert (resumed.stage.value, resumed.status.value) == (
        "awaiting_dependency_approval",
        "waiting",
    ), "an undecided gate waits for its decision again"
    team.approve(job_id, actor="admin")
    team.work()
    assert team.job(job_id).stage.value == "awaiting_review"
    assert _workspace_has(team, job_id, "a2.txt")


def test_a_requester_removed_after_the_approval_is_blocked_when_the_runner_resumes(
    team: Cairn, turns: Turns
) -> None:
    job_id = _at_dependency_gate(team)
    handed = len(turns.of(job_id))
    team.approve(job_id, actor="admin")
    _set_alice(team, member=False)

    team.work()
    detail = team.detail(job_id)
    assert (detail["status"], detail["stage"]) == ("blocked", "awaiting_dependency_approval")
    assert "alice is no longer a member of group default" in detail["diagnosis"]
    assert len(turns.of(job_id)) == handed, "the agent did not take another step"
    assert not _workspace_has(team, job_id, "a2.txt")

    _set_alice(team, member=True)
    with team.store.begin() as conn:
        gates.resume(conn, job_id, "admin")
    team.work()
    assert team.job(job_id).stage.value == "awaiting_review", "the approval still holds"


def test_a_run_approval_is_refused_into_a_block_when_the_requester_left(team: Cairn) -> None:
    job = team.submit(WRITE_B, actor="alice")
    team.work()
    _set_alice(team, member=False)
    team.approve(job.id, actor="admin")
    assert team.job(job.id).status.value == "blocked"
    _set_alice(team, member=True)
    with team.store.begin() as conn:
        back = gates.resume(conn, job.id, "admin")
    assert back.status.value == "waiting", "a resume never passes an undecided run gate"
    team.work()
    assert team.job(job.id).stage.value == "awaiting_run_approval"


def test_an_auto_approved_job_of_a_removed_requester_is_blocked_before_the_run_gate(
    team: Cairn,
) -> None:
    with team.store.begin() as conn:
        change_policy(conn, "default", "admin", {"run_approval": "auto"})
    job = team.submit(WRITE_B, actor="alice", kind="scheduled")
    _set_alice(team, member=False)
    team.work()
    detail = team.detail(job.id)
    assert (detail["status"], detail["stage"]) == ("blocked", "awaiting_run_approval")
    assert detail["stages"] == [], "nothing ran"
    assert [(d["gate"], d["verdict"]) for d in detail["decisions"]] == [("run", "auto")]


@pytest.mark.parametrize("change", ["repository", "base branch"])
def test_a_room_bound_elsewhere_blocks_its_earlier_jobs_on_resume(team: Cairn, change: str) -> None:
    job_id = _at_dependency_gate(team)
    team.approve(job_id, actor="admin")
    with team.store.begin() as conn:
        room = get_room(conn, "sample")
        if change == "repository":
            other = make_sample_repo(team.tmp / "moved")
            rebind_room(conn, room.id, repo=str(other), base_branch=room.base_branch)
        else:
            rebind_room(conn, room.id, repo=room.repo, base_branch="release")
    team.work()
    detail = team.detail(job_id)
    assert detail["status"] == "blocked"
    assert f"room sample is now bound to a different {change}" in detail["diagnosis"]
    assert str(team.tmp) not in detail["diagnosis"], "the diagnosis names no path"
    assert {"action": "retry", "job": job_id} in detail["next"]
    assert not _workspace_has(team, job_id, "a2.txt")


def test_a_job_submitted_after_a_rebind_runs_in_the_room_as_it_is(team: Cairn) -> None:
    with team.store.begin() as conn:
        room = get_room(conn, "sample")
        rebind_room(conn, room.id, repo=room.repo, base_branch="main")
    job = team.submit(WRITE_B)
    team.work()
    team.approve(job.id)
    team.work()
    assert team.job(job.id).stage.value == "awaiting_review"
