"""An append-only history: retries leave old jobs untouched, policy changes are decisions, and
any edit to a decision row breaks the chain at that row."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from cairn.errors import InvalidState, NotAllowed, UsageError
from cairn.jobs import gates
from cairn.jobs.policy import GroupPolicy, change_policy
from cairn.jobs.submit import retry_job
from cairn.store import Store, decisions, identity
from cairn.store import jobs as job_ledger
from cairn.store.rooms import create_room
from cairn.store.schema import decisions as decisions_table
from cairn.testing.harness import Cairn

from .conftest import WRITE_B


def _retry(team: Cairn, job_id: int, actor: str = "alice") -> int:
    with team.store.begin() as conn:
        return retry_job(conn, job_id, actor).id


def test_retry_leaves_the_rejected_job_untouched_and_links_a_new_job(team: Cairn) -> None:
    old = team.submit(WRITE_B, "Add b.txt")
    team.work()
    team.approve(old.id)
    team.work()
    team.reject(old.id, "b.txt belongs in docs/")
    before = team.detail(old.id)

    new_id = _retry(team, old.id)
    assert team.detail(old.id) == before, "the old job's whole record is unchanged"

    with team.store.begin() as conn:
        old_request = job_ledger.get_request(conn, old.request_id)
        new = job_ledger.get_job(conn, new_id)
        new_request = job_ledger.get_request(conn, new.request_id)
    assert new.retry_of == old.id and new_request.id != old_request.id
    assert (new_request.text, new_request.agent, new_request.kind) == (
        old_request.text,
        old_request.agent,
        old_request.kind,
    )
    assert new_request.scope["retry_of"] == old.id
    assert "reference_branch" not in new_request.scope, "the rejected job pushed nothing"
    assert new.baseline is None and team.branch(new.id) != team.branch(old.id)

    team.work()
    team.approve(new_id)
    team.work()
    shown = team.detail(new_id)
    assert (shown["stage"], shown["retry_of"]) == ("awaiting_review", old.id)
    assert team.detail(old.id) == before


def test_retry_of_a_delivered_job_names_its_branch_for_the_new_request(team: Cairn) -> None:
    old = team.submit(WRITE_B)
    for _ in range(2):
        team.work()
        team.approve(old.id)
    team.work()
    assert team.job(old.id).status.value == "completed"
    new_id = _retry(team, old.id, actor="bob")
    with team.store.begin() as conn:
        scope = job_ledger.get_request(conn, job_ledger.get_job(conn, new_id).request_id).scope
    assert scope["reference_branch"] == team.branch(old.id)
    assert team.git("rev-parse", "--verify", team.branch(old.id))


def test_only_an_ended_job_is_retried_and_only_by_a_member(team: Cairn) -> None:
    job = team.submit(WRITE_B)
    with pytest.raises(InvalidState, match="has not ended"):
        _retry(team, job.id)
    with team.store.begin() as conn:
        gates.cancel(conn, job.id, "alice")
    with pytest.raises(NotAllowed, match="carol is not a member of group default"):
        _retry(team, job.id, actor="carol")
    assert team.job(_retry(team, job.id)).retry_of == job.id


def test_a_policy_change_is_a_decision_naming_the_old_and_the_new_policy(team: Cairn) -> None:
    with team.store.begin() as conn:
        group, decision = change_policy(
            conn, "default", "admin", {"run_approval": "auto"}, reason="nightly refresh"
        )
    assert decision is not None
    assert (decision.job_id, decision.gate, decision.verdict, decision.actor) == (
        None,
        "policy",
        "changed",
        "admin",
    )
    assert decision.reason == (
        "before: run_approval=admin dependency_approval=admin integration=admin; nightly refresh"
    )
    assert decision.policy == (
        "group default: run_approval=auto(scheduled) dependency_approval=admin integration=admin"
    )
    assert GroupPolicy.of(group).auto_approves("scheduled")
    assert not GroupPolicy.of(group).auto_approves("interactive")

    with team.store.begin() as conn:
        assert change_policy(conn, "default", "bob", {"run_approval": "auto"})[1] is None
    with team.store.begin() as conn, pytest.raises(NotAllowed, match="alice is a member"):
        change_policy(conn, "default", "alice", {"dependency_approval": "member"})
    with team.store.begin() as conn, pytest.raises(NotAllowed, match="carol is not a member"):
        change_policy(conn, "default", "carol", {"dependency_approval": "member"})
    with team.store.begin() as conn:
        assert decisions.verify_chain(conn).checked == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"run_approval": "sometimes"}, "run_approval .* must be one of admin, auto"),
        ({"dependency_approval": "anyone"}, "dependency_approval .* must be one of admin, member"),
        ({"integration": "member"}, "integration .* must be one of admin"),
        ({"auto_approve_kinds": ["nightly"]}, "lists job kinds: interactive, scheduled"),
        ({"auto_approve_kinds": ["scheduled"]}, "applies only with run_approval=auto"),
    ],
)
def test_a_policy_cairn_does_not_know_is_refused(team: Cairn, changes: dict, message: str) -> None:
    with team.store.begin() as conn, pytest.raises(UsageError, match=message):
        change_policy(conn, "default", "admin", changes)


def test_a_stored_policy_cairn_cannot_read_means_the_strictest(team: Cairn) -> None:
    odd = {"run_approval": "manual", "dependency_approval": "member", "auto_approve_kinds": 3}
    with team.store.begin() as conn:
        group = identity.add_group(conn, "odd", odd)
    assert GroupPolicy.of(group) == GroupPolicy(dependency_approval="member")
    legacy = group.evolve(policy={"run_approval": "auto"})
    assert GroupPolicy.of(legacy).auto_approve_kinds == ("scheduled",)


def _seed_chain(store: Store) -> tuple[list[int], int]:
    """Three decisions: a policy change, a gate decision on a job, another policy change."""
    with store.begin() as conn:
        group = identity.add_group(conn, "default")
        admin = identity.add_user(conn, "admin")
        identity.set_membership(conn, group.id, admin.id, "admin")
        room = create_room(conn, name="r", group_id=group.id, repo="/srv/r.git", base_branch="m")
        job = job_ledger.submit(
            conn, room_id=room.id, requester_id=admin.id, text="t", agent={}, scope={}
        )
        change_policy(conn, "default", "admin", {"run_approval": "auto"}, "why")
        decisions.append(conn, job_id=job.id, gate="run", verdict="auto", actor="policy")
        change_policy(conn, "default", "admin", {"dependency_approval": "member"})
        return [r.id for r in _all(conn)], job.id


def _all(conn: sa.Connection) -> list:
    return list(conn.execute(sa.select(decisions_table).order_by("id")))


EDITS = {
    "job_id": lambda row, job_id: {"job_id": None if row.job_id else job_id},
    "gate": lambda row, _: {"gate": "cancel"},
    "verdict": lambda row, _: {"verdict": "approved"},
    "actor": lambda row, _: {"actor": "mallory"},
    "reason": lambda row, _: {"reason": "nothing to see"},
    "policy": lambda row, _: {"policy": "group default: run_approval=auto(interactive)"},
    "at": lambda row, _: {"at": row.at + timedelta(microseconds=1)},
    "prev_hash": lambda row, _: {"prev_hash": "f" * 64},
    "hash": lambda row, _: {"hash": "e" * 64},
}


@pytest.mark.parametrize("column", list(EDITS))
@pytest.mark.parametrize("row_index", [0, 1, 2])
def test_editing_any_decision_row_breaks_the_chain_at_that_row(
    store: Store, column: str, row_index: int
) -> None:
    ids, job_id = _seed_chain(store)
    with store.begin() as conn:
        assert decisions.verify_chain(conn).ok
        row = next(r for r in _all(conn) if r.id == ids[row_index])
        conn.execute(
            sa.update(decisions_table)
            .where(decisions_table.c.id == row.id)
            .values(**EDITS[column](row, job_id))
        )
    with store.begin() as conn:
        report = decisions.verify_chain(conn)
    assert not report.ok and report.broken_id == ids[row_index]
    assert report.checked == row_index, "every row before the edited one still verifies"
