"""The store contract: every ledger operation behaves the same on SQLite and on PostgreSQL.

Every test here takes the `store` fixture, which is parametrized over both backends
(huey's one-contract-class-per-storage model).
"""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from cairn.engine import EffectStatus
from cairn.errors import InvalidState, LeaseLost, NotFound, StoreError, UsageError
from cairn.next_action import Action, NextAction
from cairn.stages import Stage, Status
from cairn.store import Store, identity, leases, progress, rooms
from cairn.store import contexts as context_ledger
from cairn.store import decisions as decision_ledger
from cairn.store import dependency_requests as dependency_ledger
from cairn.store import effects as effect_ledger
from cairn.store import jobs as job_ledger
from cairn.store import stage_runs as stage_run_ledger
from cairn.store.records import Decision, Job, RequestStatus, Room, User
from cairn.store.schema import contexts, decisions, effects, memberships

AGENT = {"adapter": "script", "model": None, "settings": {"steps": [1, 2, {"x": "y"}]}}
SCOPE = {"dependencies": False, "commands": ["pytest -q"], "network": False, "deliver": "pr"}
LATER = timedelta(hours=1)


def seed_room(store: Store, name: str = "backend") -> tuple[User, Room]:
    """A requester and a room of a group, the minimum a job needs."""
    with store.begin() as conn:
        user = identity.add_user(conn, f"{name}-alice")
        group = identity.add_group(conn, f"{name}-team")
        identity.set_membership(conn, group.id, user.id, "member")
        room = rooms.create_room(
            conn, name=name, group_id=group.id, repo="/srv/repo.git", base_branch="main"
        )
    return user, room


def submit_jobs(store: Store, count: int = 1, room_name: str = "backend") -> list[Job]:
    user, room = seed_room(store, room_name)
    with store.begin() as conn:
        return [
            job_ledger.submit(
                conn,
                room_id=room.id,
                requester_id=user.id,
                text=f"task {n}",
                agent=AGENT,
                scope=SCOPE,
            )
            for n in range(count)
        ]


def claim(store: Store, runner: str = "runner-a", **kwargs: Any) -> Job | None:
    with store.begin() as conn:
        return leases.claim(conn, runner, 60, **kwargs)


def claimed(store: Store, runner: str = "runner-a", **kwargs: Any) -> Job:
    job = claim(store, runner, **kwargs)
    assert job is not None, f"{runner} found nothing to claim"
    return job


def get_job(store: Store, job_id: int) -> Job:
    with store.begin() as conn:
        return job_ledger.get_job(conn, job_id)


def append_decisions(store: Store, count: int, job_id: int | None = None) -> list[int]:
    with store.begin() as conn:
        return [
            decision_ledger.append(
                conn, job_id=job_id, gate="run", verdict="approved", actor="bob", reason=f"r{n}"
            ).id
            for n in range(count)
        ]


def assert_utc(value: datetime | None) -> None:
    assert value is not None
    assert value.tzinfo is not None
    assert value.utcoffset() == timedelta(0)


# --- opening the store ------------------------------------------------------------------


def test_open_reports_its_dialect(store: Store, store_url: str) -> None:
    assert store.dialect == ("sqlite" if store_url.startswith("sqlite") else "postgresql")


def test_reopening_without_create_sees_the_same_ledgers(store: Store, store_url: str) -> None:
    seed_room(store)
    again = Store.open(store_url)
    try:
        with again.begin() as conn:
            assert [room.name for room in rooms.list_rooms(conn)] == ["backend"]
    finally:
        again.close()


def test_a_read_sees_the_last_commit_while_a_writer_holds_its_transaction(store: Store) -> None:
    with store.begin() as conn:
        identity.add_user(conn, "alice")
    written, read_done = threading.Event(), threading.Event()
    order: list[str] = []

    def writer() -> None:
        with store.begin() as conn:
            identity.add_user(conn, "bob")
            written.set()
            # Held open until the read ends: a read that waited for this writer would not
            # end first, and this wait would run out instead.
            read_done.wait(timeout=30)
            order.append("writer committed")

    holding = threading.Thread(target=writer)
    holding.start()
    assert written.wait(timeout=30)
    with store.read() as conn:
        names = [user.name for user in identity.list_users(conn)]
    order.append("read")
    read_done.set()
    holding.join()
    assert order == ["read", "writer committed"]
    assert names == ["alice"]  # bob was not committed yet
    with store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["alice", "bob"]


def test_a_read_sees_one_state_of_the_store_from_its_first_statement_to_its_end(
    store: Store,
) -> None:
    with store.begin() as conn:
        identity.add_user(conn, "alice")
    with store.read() as conn:
        before = [user.name for user in identity.list_users(conn)]
        with store.begin() as other:  # committed while the read is open
            identity.add_user(other, "bob")
        after = [user.name for user in identity.list_users(conn)]
    assert before == after == ["alice"]
    with store.read() as conn:
        assert [user.name for user in identity.list_users(conn)] == ["alice", "bob"]


def test_a_write_through_the_read_door_is_refused(store: Store) -> None:
    with store.read() as conn, pytest.raises(sa.exc.DBAPIError):
        identity.add_user(conn, "alice")
    with store.read() as conn:
        assert identity.find_user(conn, "alice") is None


# --- identity ---------------------------------------------------------------------------


def test_user_is_found_by_id_and_by_name(store: Store) -> None:
    with store.begin() as conn:
        alice = identity.add_user(conn, "alice")
        assert identity.get_user(conn, alice.id) == alice
        assert identity.get_user(conn, "alice") == alice
        assert identity.find_user(conn, "alice") == alice
        assert identity.find_user(conn, "nobody") is None
    assert alice.name == "alice"
    assert_utc(alice.created_at)


def test_duplicate_user_name_is_a_usage_error(store: Store) -> None:
    with store.begin() as conn:
        identity.add_user(conn, "alice")
    with store.begin() as conn, pytest.raises(UsageError, match="'alice' already exists"):
        identity.add_user(conn, "alice")


@pytest.mark.parametrize("kind", ["user", "group", "room"])
def test_invalid_names_are_usage_errors_and_a_64_character_name_is_valid(
    store: Store, kind: str
) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "rooms-group")

    def add(conn: sa.Connection, name: str) -> object:
        if kind == "user":
            return identity.add_user(conn, name)
        if kind == "group":
            return identity.add_group(conn, name)
        return rooms.create_room(conn, name=name, group_id=group.id, repo="r", base_branch="m")

    for bad in ["", "a b", "x" * 65, "semi;colon", "slash/name", "quote'", "tab\t"]:
        with store.begin() as conn, pytest.raises(UsageError, match=f"a {kind} name uses"):
            add(conn, bad)
    with store.begin() as conn:
        assert add(conn, "Ok-name_1.2") is not None
        assert add(conn, "y" * 64) is not None


def test_group_without_a_policy_gets_the_default_policy(store: Store) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "team")
        assert identity.get_group(conn, "team") == group
        assert identity.get_group(conn, group.id) == group
    assert group.policy == identity.DEFAULT_POLICY
    assert_utc(group.created_at)


def test_group_keeps_the_policy_it_was_given(store: Store) -> None:
    policy = {"run_approval": "manual", "scheduled": {"auto": True, "agents": ["a", "b"]}}
    with store.begin() as conn:
        group = identity.add_group(conn, "strict", policy)
    with store.begin() as conn:
        assert identity.get_group(conn, group.id).policy == policy


def test_group_given_an_explicit_empty_policy_keeps_it(store: Store) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "bare", {})
    assert group.policy == {}


def test_duplicate_group_name_is_a_usage_error(store: Store) -> None:
    with store.begin() as conn:
        identity.add_group(conn, "team")
    with store.begin() as conn, pytest.raises(UsageError, match="'team' already exists"):
        identity.add_group(conn, "team")


def test_membership_role_changes_in_place(store: Store) -> None:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
        assert identity.membership(conn, group.id, user.id) is None
        added = identity.set_membership(conn, group.id, user.id, "member")
    with store.begin() as conn:
        assert identity.membership(conn, group.id, user.id) == added
        assert added.role == "member"
        promoted = identity.set_membership(conn, group.id, user.id, "admin")
    with store.begin() as conn:
        assert identity.membership(conn, group.id, user.id) == promoted
        assert promoted.role == "admin"
        rows = conn.execute(sa.select(sa.func.count()).select_from(memberships)).scalar()
    assert rows == 1


def test_memberships_are_per_group(store: Store) -> None:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        first = identity.add_group(conn, "first")
        second = identity.add_group(conn, "second")
        identity.set_membership(conn, first.id, user.id, "admin")
        assert identity.membership(conn, second.id, user.id) is None


def test_unknown_role_is_a_usage_error(store: Store) -> None:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
    with store.begin() as conn, pytest.raises(UsageError, match="member, admin"):
        identity.set_membership(conn, group.id, user.id, "owner")


def test_missing_records_raise_not_found_saying_what_to_do(store: Store) -> None:
    cases = [
        (lambda c: identity.get_user(c, "ghost"), "no user 'ghost'", Action.add_user),
        (lambda c: identity.get_user(c, 999), "no user 999", Action.add_user),
        (lambda c: identity.get_group(c, "ghost"), "no group 'ghost'", Action.add_group),
        (lambda c: rooms.get_room(c, "ghost"), "no room 'ghost'", Action.create_room),
        (lambda c: job_ledger.get_job(c, 999), "no job 999", Action.list_jobs),
        (lambda c: job_ledger.get_request(c, 999), "no request 999", None),
    ]
    for lookup, message, action in cases:
        with store.begin() as conn, pytest.raises(NotFound) as caught:
            lookup(conn)
        assert str(caught.value).startswith(message)
        # What to do is a structured next action; the CLI words it (`cairn user add NAME`...).
        assert caught.value.next_actions == ((NextAction(action),) if action else ())


# --- rooms ------------------------------------------------------------------------------


def test_room_is_bound_to_its_repository_and_base_branch(store: Store) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "team")
        room = rooms.create_room(
            conn,
            name="web",
            group_id=group.id,
            repo="https://example.org/web.git",
            base_branch="release/2.x",
            verify_command="make test",
        )
    with store.begin() as conn:
        assert rooms.get_room(conn, room.id) == room
        assert rooms.get_room(conn, "web") == room
    assert (room.group_id, room.repo, room.base_branch, room.verify_command) == (
        group.id,
        "https://example.org/web.git",
        "release/2.x",
        "make test",
    )
    assert_utc(room.created_at)


def test_rooms_are_listed_in_creation_order_and_names_are_unique(store: Store) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "team")
        for name in ["zeta", "alpha", "mid"]:
            rooms.create_room(conn, name=name, group_id=group.id, repo="r", base_branch="main")
    with store.begin() as conn:
        listed = rooms.list_rooms(conn)
        assert [room.name for room in listed] == ["zeta", "alpha", "mid"]
        assert listed[0].verify_command is None
    with store.begin() as conn, pytest.raises(UsageError, match="'alpha' already exists"):
        rooms.create_room(conn, name="alpha", group_id=group.id, repo="r", base_branch="main")


# --- requests and jobs ------------------------------------------------------------------


def test_submitted_job_is_queued_with_no_lease_and_its_own_branch(store: Store) -> None:
    (job,) = submit_jobs(store)
    assert (job.stage, job.status) == (Stage.queued, Status.queued)
    assert isinstance(job.stage, Stage)
    assert isinstance(job.status, Status)
    assert (job.lease_owner, job.lease_expires_at, job.fencing_token) == (None, None, 0)
    assert (job.baseline, job.result_fingerprint, job.summary, job.diagnosis) == (None,) * 4
    assert job.retry_of is None
    branch = job.branch_in(store.installation_id)
    assert branch == f"cairn/{store.installation_id[:8]}/job-{job.id}"
    assert job.branch_in("0123abcd" + "0" * 24) == f"cairn/0123abcd/job-{job.id}"
    assert job.created_at == job.updated_at
    assert_utc(job.created_at)


def test_request_text_and_json_agent_and_scope_round_trip(store: Store) -> None:
    user, room = seed_room(store)
    text = "Fix the parser:\n  - keep 'quotes' and \"double\"\n  - ünïcødé ✓ 日本語\n"
    with store.begin() as conn:
        job = job_ledger.submit(
            conn,
            room_id=room.id,
            requester_id=user.id,
            text=text,
            agent=AGENT,
            scope=SCOPE,
            kind="scheduled",
        )
    with store.begin() as conn:
        request = job_ledger.get_request(conn, job.request_id)
    assert (request.room_id, request.requester_id, request.kind) == (room.id, user.id, "scheduled")
    assert request.text == text
    assert request.agent == AGENT
    assert request.scope == SCOPE
    assert request.created_at == job.created_at


def test_retry_is_a_new_job_linked_to_the_old_one(store: Store) -> None:
    (old,) = submit_jobs(store)
    with store.begin() as conn:
        request = job_ledger.get_request(conn, old.request_id)
        new = job_ledger.submit(
            conn,
            room_id=old.room_id,
            requester_id=request.requester_id,
            text=request.text,
            agent=request.agent,
            scope=request.scope,
            retry_of=old.id,
        )
    assert new.id != old.id
    assert new.request_id != old.request_id
    assert new.retry_of == old.id


def test_jobs_are_listed_in_order_and_filtered_by_room(store: Store) -> None:
    first = submit_jobs(store, 2, room_name="one")
    second = submit_jobs(store, 2, room_name="two")
    with store.begin() as conn:
        assert [j.id for j in job_ledger.list_jobs(conn)] == [j.id for j in first + second]
        assert job_ledger.list_jobs(conn, room_id=second[0].room_id) == second
        assert job_ledger.list_jobs(conn, room_id=first[0].room_id) == first
        assert job_ledger.get_job(conn, first[1].id) == first[1]


def test_submit_logs_the_queued_event(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        (event,) = progress.events_for_job(conn, job.id)
    assert (event.stage, event.status, event.at) == ("queued", "queued", job.created_at)


def test_transition_logs_an_event_only_when_stage_or_status_changes(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        job = job_ledger.transition(conn, job, Stage.awaiting_run_approval, Status.waiting)
        job = job_ledger.transition(
            conn, job, Stage.awaiting_run_approval, Status.waiting, diagnosis="still waiting"
        )
        job = job_ledger.transition(conn, job, Stage.awaiting_run_approval, Status.queued)
        job = job_ledger.transition(conn, job, Stage.preparing_baseline, Status.queued)
        events = progress.events_for_job(conn, job.id)
    assert [(e.stage, e.status) for e in events] == [
        ("queued", "queued"),
        ("awaiting_run_approval", "waiting"),
        ("awaiting_run_approval", "queued"),
        ("preparing_baseline", "queued"),
    ]
    assert (job.stage, job.status) == (Stage.preparing_baseline, Status.queued)
    assert [e.at for e in events] == sorted(e.at for e in events)


def test_a_diagnosis_belongs_to_the_state_it_explains(store: Store) -> None:
    """Kept while the job stays put, cleared by a move, replaced by a move that brings one."""
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        blocked = job_ledger.transition(
            conn, job, Stage.preparing_baseline, Status.blocked, diagnosis="dirty checkout"
        )
        recorded = job_ledger.transition(
            conn, blocked, blocked.stage, blocked.status, baseline="abc"
        )
        resumed = job_ledger.transition(conn, recorded, Stage.preparing_baseline, Status.queued)
        failed = job_ledger.transition(
            conn, resumed, Stage.failed, Status.failed, diagnosis="the agent gave up"
        )
    with store.begin() as conn:
        stored = job_ledger.get_job(conn, job.id)
    assert (blocked.diagnosis, recorded.diagnosis) == ("dirty checkout", "dirty checkout")
    assert resumed.diagnosis is None, "the block's diagnosis does not outlive the block"
    assert failed.diagnosis == stored.diagnosis == "the agent gave up"


def test_transition_keeps_the_lease_while_running_and_clears_it_when_leaving(
    store: Store,
) -> None:
    submit_jobs(store)
    job = claimed(store)
    with store.begin() as conn:
        running = job_ledger.transition(conn, job, Stage.preparing_workspace, Status.running)
    assert (running.lease_owner, running.lease_expires_at) == (
        job.lease_owner,
        job.lease_expires_at,
    )
    with store.begin() as conn:
        waiting = job_ledger.transition(
            conn, running, Stage.awaiting_dependency_approval, Status.waiting
        )
    assert (waiting.lease_owner, waiting.lease_expires_at) == (None, None)
    assert waiting.fencing_token == job.fencing_token


def test_transition_refuses_a_job_that_moved_meanwhile(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        job_ledger.transition(conn, job, Stage.preparing_baseline, Status.running)
    with store.begin() as conn, pytest.raises(InvalidState, match="changed while"):
        job_ledger.transition(conn, job, Stage.cancelled, Status.cancelled)
    with store.begin() as conn:
        assert job_ledger.get_job(conn, job.id).stage is Stage.preparing_baseline


def test_transition_refuses_a_field_the_jobs_table_does_not_have(store: Store) -> None:
    """A move's SET clause is built from its parameters: a misspelt field must not be dropped
    silently, nor the move made without it."""
    (job,) = submit_jobs(store)
    with store.begin() as conn, pytest.raises(TypeError, match="summry"):
        job_ledger.transition(conn, job, Stage.preparing_baseline, Status.running, summry="x")
    assert get_job(store, job.id) == job


def test_a_fenced_transition_moves_only_under_the_current_token(store: Store) -> None:
    submit_jobs(store)
    first = claimed(store, "runner-a")
    assert first.lease_expires_at is not None
    second = claimed(store, "runner-b", now=first.lease_expires_at + timedelta(microseconds=1))
    with store.begin() as conn, pytest.raises(LeaseLost):
        job_ledger.transition(
            conn, first, first.stage, Status.running, fencing_token=first.fencing_token
        )
    with store.begin() as conn:
        moved = job_ledger.transition(
            conn,
            second,
            Stage.preparing_baseline,
            Status.running,
            fencing_token=second.fencing_token,
            baseline="abc",
        )
    assert (moved.stage, moved.baseline, moved.lease_owner) == (
        Stage.preparing_baseline,
        "abc",
        "runner-b",
    )
    assert moved == get_job(store, second.id)  # what the move returned is what is stored
    token = moved.fencing_token
    with store.begin() as conn:
        verifying = job_ledger.transition(
            conn, moved, Stage.verifying, Status.running, fencing_token=token
        )
    with store.begin() as conn, pytest.raises(InvalidState, match="changed while"):
        job_ledger.transition(  # the right token, but the job is no longer where `moved` says
            conn, moved, Stage.summarizing, Status.running, fencing_token=token
        )
    with store.begin() as conn:
        waiting = job_ledger.transition(
            conn, verifying, Stage.awaiting_review, Status.waiting, fencing_token=token
        )
    with store.begin() as conn, pytest.raises(LeaseLost):  # a waiting job takes no fenced write
        job_ledger.transition(conn, waiting, Stage.delivering, Status.running, fencing_token=token)
    with store.read() as conn:
        events = [(e.stage, e.status) for e in progress.events_for_job(conn, second.id)]
    assert events[-3:] == [
        (Stage.preparing_baseline, Status.running),
        (Stage.verifying, Status.running),
        (Stage.awaiting_review, Status.waiting),
    ]
    assert get_job(store, second.id).stage is Stage.awaiting_review


def test_usage_adds_up_per_job(store: Store) -> None:
    first, second = submit_jobs(store, 2)
    with store.begin() as conn:
        progress.add_usage(conn, first.id, agent="openai", seconds=1.5, input_tokens=10)
        progress.add_usage(
            conn, first.id, agent="openai", seconds=0.25, run_kind="corrective", output_tokens=7
        )
        rows = progress.usage_for_job(conn, first.id)
        assert progress.usage_for_job(conn, second.id) == []
    assert [(u.run_kind, u.seconds, u.input_tokens, u.output_tokens) for u in rows] == [
        ("normal", 1.5, 10, 0),
        ("corrective", 0.25, 0, 7),
    ]


# --- leases -----------------------------------------------------------------------------


def test_claim_gives_the_job_to_one_runner_and_bumps_the_fencing_token(store: Store) -> None:
    (job,) = submit_jobs(store)
    now = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    got = claimed(store, "runner-a", now=now)
    assert got.id == job.id
    assert got.status is Status.running
    assert got.stage is Stage.queued
    assert got.fencing_token == job.fencing_token + 1
    assert got.lease_owner == "runner-a"
    assert got.lease_expires_at == now + timedelta(seconds=60)
    assert claim(store, "runner-b", now=now) is None
    assert get_job(store, job.id).lease_owner == "runner-a"


def test_running_job_with_a_live_lease_is_not_claimable(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store, "runner-a")
    assert job.lease_expires_at is not None
    almost = job.lease_expires_at - timedelta(microseconds=1)
    assert claim(store, "runner-b", now=almost) is None
    assert claim(store, "runner-b", job_id=job.id, now=almost) is None


def test_expired_lease_is_claimable_by_another_runner(store: Store) -> None:
    submit_jobs(store)
    first = claimed(store, "runner-a")
    assert first.lease_expires_at is not None
    second = claimed(store, "runner-b", now=first.lease_expires_at + timedelta(microseconds=1))
    assert second.id == first.id
    assert second.lease_owner == "runner-b"
    assert second.fencing_token == first.fencing_token + 1
    assert second.stage is first.stage


def test_claim_takes_the_oldest_job_first_or_the_one_asked_for(store: Store) -> None:
    first, second, third = submit_jobs(store, 3)
    assert claimed(store, "r1", job_id=third.id).id == third.id
    assert claimed(store, "r2").id == first.id
    assert claimed(store, "r3").id == second.id
    assert claim(store, "r4") is None


def test_jobs_at_a_gate_blocked_or_ended_are_not_claimable(store: Store) -> None:
    jobs = submit_jobs(store, 3)
    with store.begin() as conn:
        job_ledger.transition(conn, jobs[0], Stage.awaiting_review, Status.waiting)
        job_ledger.transition(conn, jobs[1], Stage.preparing_baseline, Status.blocked)
        job_ledger.transition(conn, jobs[2], Stage.completed, Status.completed)
    assert claim(store, "runner", now=datetime.now(UTC) + LATER) is None


def test_renew_extends_the_lease_only_for_the_current_token(store: Store) -> None:
    submit_jobs(store)
    old = claimed(store, "runner-a", now=datetime.now(UTC) - LATER)
    assert old.lease_expires_at is not None
    with store.begin() as conn:
        assert leases.renew(conn, old.id, old.fencing_token, 600) is True
    renewed = get_job(store, old.id)
    assert renewed.lease_expires_at is not None
    assert renewed.lease_expires_at > datetime.now(UTC) + timedelta(seconds=500)
    assert claim(store, "runner-b") is None

    new = claimed(store, "runner-b", now=renewed.lease_expires_at + timedelta(seconds=1))
    with store.begin() as conn:
        assert leases.renew(conn, new.id, old.fencing_token, 600) is False
    assert get_job(store, new.id).lease_expires_at == new.lease_expires_at


def test_renew_fails_once_the_job_left_the_running_status(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    with store.begin() as conn:
        job_ledger.transition(conn, job, Stage.awaiting_review, Status.waiting)
        assert leases.renew(conn, job.id, job.fencing_token, 600) is False


def test_release_leaves_the_job_runnable_for_the_next_claim(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store, "runner-a")
    with store.begin() as conn:
        leases.release(conn, job.id, job.fencing_token)
    released = get_job(store, job.id)
    assert released.status is Status.queued
    assert (released.lease_owner, released.lease_expires_at) == (None, None)
    again = claimed(store, "runner-b")
    assert (again.id, again.fencing_token) == (job.id, job.fencing_token + 1)


def test_release_with_a_stale_token_changes_nothing(store: Store) -> None:
    submit_jobs(store)
    first = claimed(store, "runner-a", now=datetime.now(UTC) - LATER)
    second = claimed(store, "runner-b")
    with store.begin() as conn:
        leases.release(conn, first.id, first.fencing_token)
    assert get_job(store, first.id) == second


# --- the fenced door --------------------------------------------------------------------


def test_fenced_commits_writes_under_the_current_token(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    with store.fenced(job.id, job.fencing_token) as conn:
        job_ledger.transition(conn, job, job.stage, job.status, baseline="b" * 40)
    assert get_job(store, job.id).baseline == "b" * 40


def test_fenced_refuses_a_superseded_token_with_lease_lost(store: Store) -> None:
    submit_jobs(store)
    stale = claimed(store, "runner-a", now=datetime.now(UTC) - LATER)
    current = claimed(store, "runner-b")
    with (
        pytest.raises(LeaseLost, match=f"job {stale.id} is now held by another runner"),
        store.fenced(stale.id, stale.fencing_token) as conn,
    ):
        job_ledger.update(conn, stale, summary="from the dead runner")
    assert get_job(store, stale.id) == current
    assert issubclass(LeaseLost, StoreError)


def test_fenced_refuses_writes_to_a_terminal_job(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    with store.begin() as conn:
        ended = job_ledger.transition(conn, job, Stage.failed, Status.failed)
    assert ended.fencing_token == job.fencing_token
    with pytest.raises(LeaseLost), store.fenced(job.id, job.fencing_token) as conn:
        job_ledger.update(conn, ended, diagnosis="rewritten")
    assert get_job(store, job.id) == ended


def test_fenced_refuses_an_unknown_job(store: Store) -> None:
    with pytest.raises(LeaseLost, match="job 404"), store.fenced(404, 1):
        pass


def test_fenced_writes_roll_back_when_the_block_raises(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    with pytest.raises(RuntimeError, match="boom"), store.fenced(job.id, job.fencing_token) as c:
        job_ledger.transition(c, job, Stage.verifying, Status.running, summary="half")
        stage_run_ledger.start(c, job.id, "verifying", "recipe", job.fencing_token)
        raise RuntimeError("boom")
    with store.begin() as conn:
        assert job_ledger.get_job(conn, job.id) == job
        assert stage_run_ledger.for_job(conn, job.id) == []
        assert len(progress.events_for_job(conn, job.id)) == 1


# --- stage runs -------------------------------------------------------------------------


def test_stage_runs_number_attempts_per_job_and_stage(store: Store) -> None:
    one, two = submit_jobs(store, 2)
    with store.begin() as conn:
        first = stage_run_ledger.start(conn, one.id, "verifying", "recipe-1", 1)
        other_stage = stage_run_ledger.start(conn, one.id, "summarizing", "recipe-s", 1)
        second = stage_run_ledger.start(conn, one.id, "verifying", "recipe-2", 2)
        other_job = stage_run_ledger.start(conn, two.id, "verifying", "recipe-1", 1)
        runs = stage_run_ledger.for_job(conn, one.id)
    assert [(r.id, r.stage, r.attempt) for r in runs] == [
        (first.id, "verifying", 1),
        (other_stage.id, "summarizing", 1),
        (second.id, "verifying", 2),
    ]
    assert runs[1:] == [other_stage, second]
    assert other_job.attempt == 1
    assert (second.recipe_id, second.fencing_token, second.status) == ("recipe-2", 2, "running")
    assert (first.status, first.content_id, first.evidence, first.ended_at) == (
        "running",
        None,
        None,
        None,
    )
    assert_utc(first.started_at)


def test_starting_a_stage_again_abandons_the_attempt_left_running(store: Store) -> None:
    one, two = submit_jobs(store, 2)
    with store.begin() as conn:
        cut_off = stage_run_ledger.start(conn, one.id, "verifying", "recipe", 1)
        accepted = stage_run_ledger.start(conn, one.id, "summarizing", "recipe", 1)
        stage_run_ledger.finish(conn, accepted.id, status="accepted", content_id="c", evidence={})
        elsewhere = stage_run_ledger.start(conn, two.id, "verifying", "recipe", 1)
    with store.begin() as conn:
        retry = stage_run_ledger.start(conn, one.id, "verifying", "recipe", 2)
        summary_retry = stage_run_ledger.start(conn, one.id, "summarizing", "recipe", 2)
        abandoned = stage_run_ledger.get(conn, cut_off.id)
        still_accepted = stage_run_ledger.get(conn, accepted.id)
        untouched = stage_run_ledger.get(conn, elsewhere.id)
    assert (abandoned.status, retry.attempt, retry.status) == ("abandoned", 2, "running")
    assert abandoned.ended_at is not None
    assert abandoned.ended_at >= abandoned.started_at
    assert (still_accepted.status, summary_retry.attempt) == ("accepted", 2)
    assert untouched == elsewhere


def test_finishing_a_stage_run_records_content_and_evidence(store: Store) -> None:
    (job,) = submit_jobs(store)
    evidence = {"files_changed": 3, "tests": {"executed": 41, "collected": 41}}
    with store.begin() as conn:
        run = stage_run_ledger.start(conn, job.id, "running_agent", "r" * 64, 1)
        done = stage_run_ledger.finish(
            conn, run.id, status="accepted", content_id="c" * 40, evidence=evidence
        )
    with store.begin() as conn:
        assert stage_run_ledger.get(conn, run.id) == done
    assert (done.status, done.content_id, done.evidence) == ("accepted", "c" * 40, evidence)
    assert (done.attempt, done.recipe_id, done.started_at) == (1, "r" * 64, run.started_at)
    assert done.ended_at is not None
    assert done.ended_at >= done.started_at
    assert_utc(done.ended_at)


# --- effects ----------------------------------------------------------------------------


def test_effect_begin_is_idempotent_per_key(store: Store) -> None:
    (job,) = submit_jobs(store)
    key = f"job-{job.id}-push"
    with store.begin() as conn:
        first = effect_ledger.begin(conn, job.id, "push", key)
    with store.begin() as conn:
        again = effect_ledger.begin(conn, job.id, "push", key)
        count = conn.execute(sa.select(sa.func.count()).select_from(effects)).scalar()
    assert again == first
    assert count == 1
    assert (first.status, first.kind, first.external_ref, first.done_at) == (
        EffectStatus.intended,
        "push",
        None,
        None,
    )
    assert_utc(first.intended_at)


def test_effect_is_marked_done_with_its_external_ref(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        effect_ledger.begin(conn, job.id, "pr", "k-pr")
        done = effect_ledger.mark(conn, "k-pr", EffectStatus.done, "https://forge/pr/7")
    with store.begin() as conn:
        assert effect_ledger.find(conn, "k-pr") == done
        assert effect_ledger.begin(conn, job.id, "pr", "k-pr") == done
    assert (done.status, done.external_ref) == ("done", "https://forge/pr/7")
    assert_utc(done.done_at)


def test_failed_effect_has_no_done_time_and_effects_are_per_job(store: Store) -> None:
    one, two = submit_jobs(store, 2)
    with store.begin() as conn:
        effect_ledger.begin(conn, one.id, "push", "k1")
        effect_ledger.begin(conn, one.id, "merge", "k2")
        effect_ledger.begin(conn, two.id, "push", "k3")
        failed = effect_ledger.mark(conn, "k2", EffectStatus.failed)
        assert [e.idempotency_key for e in effect_ledger.for_job(conn, one.id)] == ["k1", "k2"]
        assert [e.idempotency_key for e in effect_ledger.for_job(conn, two.id)] == ["k3"]
        assert effect_ledger.find(conn, "unknown") is None
    assert (failed.status, failed.done_at) == ("failed", None)


# --- contexts ---------------------------------------------------------------------------


def test_context_is_none_until_saved_and_replaced_not_appended(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        assert context_ledger.load(conn, job.id) is None
        context_ledger.save(conn, job.id, "script", {"position": 1, "notes": ["a"]})
    with store.begin() as conn:
        assert context_ledger.load(conn, job.id) == {"position": 1, "notes": ["a"]}
        context_ledger.save(conn, job.id, "script", {"position": 2}, session_id="sess-9")
    with store.begin() as conn:
        assert context_ledger.load(conn, job.id) == {"position": 2}
        rows = conn.execute(sa.select(contexts)).all()
    assert len(rows) == 1
    assert (rows[0].agent, rows[0].session_id) == ("script", "sess-9")


def test_one_jobs_context_is_never_visible_from_another_job(store: Store) -> None:
    job_a, job_b, job_c = submit_jobs(store, 3)
    with store.begin() as conn:
        context_ledger.save(conn, job_a.id, "openai", {"messages": ["secret of A"]})
        context_ledger.save(conn, job_b.id, "openai", {"messages": ["B"]})
    with store.begin() as conn:
        assert context_ledger.load(conn, job_a.id) == {"messages": ["secret of A"]}
        assert context_ledger.load(conn, job_b.id) == {"messages": ["B"]}
        assert context_ledger.load(conn, job_c.id) is None
        context_ledger.save(conn, job_b.id, "openai", {"messages": ["B2"]})
        assert context_ledger.load(conn, job_a.id) == {"messages": ["secret of A"]}


# --- dependency requests ----------------------------------------------------------------


def test_dependency_request_is_pending_until_decided(store: Store) -> None:
    one, two = submit_jobs(store, 2)
    with store.begin() as conn:
        asked = dependency_ledger.add(
            conn, one.id, ecosystem="pypi", name="requests", version="2.32.3", reason="http"
        )
        dependency_ledger.add(
            conn, one.id, ecosystem="npm", name="left-pad", version="1.3.0", reason="pad"
        )
        dependency_ledger.add(
            conn, two.id, ecosystem="pypi", name="attrs", version="24.2.0", reason="other job"
        )
        decision = decision_ledger.append(
            conn, job_id=one.id, gate="dependency", verdict="approved", actor="admin"
        )
        dependency_ledger.decide(conn, asked.id, RequestStatus.approved, decision.id)
        mine = dependency_ledger.for_job(conn, one.id)
    assert (asked.status, asked.decision_id) == ("pending", None)
    assert [(d.name, d.version, d.status) for d in mine] == [
        ("requests", "2.32.3", "approved"),
        ("left-pad", "1.3.0", "pending"),
    ]
    assert mine[0].decision_id == decision.id
    assert (mine[0].ecosystem, mine[0].reason) == ("pypi", "http")


# --- decisions --------------------------------------------------------------------------


def test_decisions_form_a_hash_chain_from_genesis(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        decision_ledger.append(
            conn, job_id=job.id, gate="run", verdict="auto", actor="policy", policy="auto-run"
        )
        decision_ledger.append(
            conn, job_id=None, gate="cancel", verdict="cancelled", actor="root", reason="é ✓"
        )
        decision_ledger.append(
            conn, job_id=job.id, gate="integration", verdict="rejected", actor="bob", reason="no"
        )
        chain = [
            Decision.from_row(r)
            for r in conn.execute(sa.select(decisions).order_by(decisions.c.id))
        ]
        report = decision_ledger.verify_chain(conn)
        mine = decision_ledger.for_job(conn, job.id)
    assert chain[0].prev_hash == decision_ledger.GENESIS
    for before, after in itertools.pairwise(chain):
        assert after.prev_hash == before.hash
    for row in chain:
        fields = {k: getattr(row, k) for k in ("job_id", "gate", "verdict", "actor", "reason")}
        assert row.hash == decision_ledger.content_hash(
            **fields, policy=row.policy, at=row.at, prev_hash=row.prev_hash
        )
        assert_utc(row.at)
    assert (report.ok, report.checked, report.broken_id) == (True, 3, None)
    assert [d.verdict for d in mine] == ["auto", "rejected"]
    assert mine[0].policy == "auto-run"


def test_empty_decision_chain_verifies(store: Store) -> None:
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn)
    assert (report.ok, report.checked, report.problem) == (True, 0, None)


@pytest.mark.parametrize("column", ["verdict", "reason", "actor"])
def test_verify_chain_names_a_row_edited_behind_its_back(store: Store, column: str) -> None:
    ids = append_decisions(store, 4)
    with store.begin() as conn:
        conn.execute(sa.update(decisions).where(decisions.c.id == ids[2]).values({column: "x"}))
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn)
    assert (report.ok, report.broken_id, report.checked) == (False, ids[2], 2)
    assert report.problem == "its content does not match its hash"


def test_verify_chain_names_the_row_after_a_deleted_one(store: Store) -> None:
    ids = append_decisions(store, 4)
    with store.begin() as conn:
        conn.execute(sa.delete(decisions).where(decisions.c.id == ids[1]))
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn)
    assert (report.ok, report.broken_id, report.checked) == (False, ids[2], 1)
    assert report.problem == "it does not follow the row before it"


def test_verify_chain_detects_a_deleted_first_row(store: Store) -> None:
    ids = append_decisions(store, 3)
    with store.begin() as conn:
        conn.execute(sa.delete(decisions).where(decisions.c.id == ids[0]))
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn)
    assert (report.ok, report.broken_id, report.checked) == (False, ids[1], 0)


def test_verify_chain_detects_a_rehashed_edit(store: Store) -> None:
    """An editor who also recomputes the row's hash still breaks the link to the next row."""
    ids = append_decisions(store, 3)
    with store.begin() as conn:
        row = conn.execute(sa.select(decisions).where(decisions.c.id == ids[1])).one()
        forged = decision_ledger.content_hash(
            job_id=row.job_id,
            gate=row.gate,
            verdict="rejected",
            actor=row.actor,
            reason=row.reason,
            policy=row.policy,
            at=row.at,
            prev_hash=row.prev_hash,
        )
        conn.execute(
            sa.update(decisions)
            .where(decisions.c.id == ids[1])
            .values(verdict="rejected", hash=forged)
        )
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn)
    assert (report.ok, report.broken_id) == (False, ids[2])


def test_a_cut_tail_passes_verify_but_not_verify_against_the_kept_head(store: Store) -> None:
    """A chain cannot see its newest rows deleted; the head kept elsewhere (an anchor) can."""
    ids = append_decisions(store, 3)
    with store.begin() as conn:
        kept = decision_ledger.verify_chain(conn)
        newest = conn.execute(sa.select(decisions.c.hash).where(decisions.c.id == ids[-1]))
        assert (kept.ok, kept.checked, kept.head) == (True, 3, newest.scalar_one())
        assert decision_ledger.verify_chain(conn, kept.head).head_in_chain is True
        conn.execute(sa.delete(decisions).where(decisions.c.id == ids[-1]))
    with store.begin() as conn:
        alone = decision_ledger.verify_chain(conn)
        anchored = decision_ledger.verify_chain(conn, kept.head)
    assert (alone.ok, alone.checked, alone.head_in_chain) == (True, 2, None)
    assert (anchored.ok, anchored.checked, anchored.head_in_chain) == (False, 2, False)
    assert anchored.broken_id is None and anchored.head != kept.head


def test_an_older_head_stays_in_a_chain_that_grew(store: Store) -> None:
    append_decisions(store, 2)
    with store.begin() as conn:
        old = decision_ledger.verify_chain(conn).head
    append_decisions(store, 2)
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn, old)
        empty_anchor = decision_ledger.verify_chain(conn, decision_ledger.GENESIS)
    assert (report.ok, report.checked, report.head_in_chain) == (True, 4, True)
    assert report.head != old
    assert empty_anchor.head_in_chain is True, "the genesis anchors every chain"


def test_the_head_of_an_empty_chain_is_the_genesis(store: Store) -> None:
    with store.begin() as conn:
        report = decision_ledger.verify_chain(conn, "f" * 64)
    assert (report.checked, report.head, report.head_in_chain, report.ok) == (
        0,
        decision_ledger.GENESIS,
        False,
        False,
    )


# --- timestamps -------------------------------------------------------------------------


def test_timestamps_come_back_aware_utc_to_the_microsecond(store: Store) -> None:
    submit_jobs(store)
    now = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    job = claimed(store, now=now)
    assert job.updated_at == now
    assert job.lease_expires_at == now + timedelta(seconds=60)
    assert_utc(job.updated_at)
    assert_utc(job.lease_expires_at)
    assert job.updated_at.microsecond == 678901


def test_timestamps_in_another_zone_are_stored_as_the_same_instant_in_utc(store: Store) -> None:
    (job,) = submit_jobs(store)
    kolkata = datetime(2030, 6, 1, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    with store.begin() as conn:
        job = job_ledger.transition(conn, job, job.stage, job.status, lease_expires_at=kolkata)
    assert job.lease_expires_at == kolkata
    assert job.lease_expires_at == datetime(2030, 6, 1, 6, 30, 0, 1, tzinfo=UTC)
    assert_utc(job.lease_expires_at)


def test_naive_timestamps_are_refused(store: Store) -> None:
    (job,) = submit_jobs(store)
    with (
        store.begin() as conn,
        pytest.raises(sa.exc.StatementError, match="only timezone-aware timestamps"),
    ):
        job_ledger.transition(
            conn, job, job.stage, job.status, lease_expires_at=datetime(2030, 1, 1)
        )


# --- named agents ------------------------------------------------------------------------

NAMED = {"adapter": "openai", "model": "qwen", "base_url": None, "api_key_env": "OPENAI_API_KEY"}


def test_named_agents_round_trip_in_order_and_names_are_unique(store: Store) -> None:
    from cairn.store import agents

    with store.begin() as conn:
        first = agents.add_agent(conn, "local-qwen", NAMED)
        agents.add_agent(conn, "hosted", NAMED | {"model": "gpt-4o-mini"})
        with pytest.raises(UsageError, match="already exists"):
            agents.add_agent(conn, "local-qwen", NAMED)
    with store.begin() as conn:
        assert [(a.name, a.spec["model"]) for a in agents.list_agents(conn)] == [
            ("local-qwen", "qwen"),
            ("hosted", "gpt-4o-mini"),
        ]
        assert agents.get_agent(conn, "local-qwen") == first
        assert agents.lookup(conn)("hosted") == NAMED | {"model": "gpt-4o-mini"}
        assert agents.lookup(conn)("nope") is None
        with pytest.raises(NotFound, match="no agent named 'nope'"):
            agents.get_agent(conn, "nope")


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "a" * 41, "has space", "openai", "script"])
def test_named_agent_names_are_checked(store: Store, name: str) -> None:
    from cairn.store import agents

    with store.begin() as conn, pytest.raises(UsageError):
        agents.add_agent(conn, name, NAMED)


def test_a_rooms_default_agent_is_kept_and_blocks_its_removal(store: Store) -> None:
    from cairn.store import agents

    _, room = seed_room(store)
    with store.begin() as conn:
        agents.add_agent(conn, "local-qwen", NAMED)
        assert room.default_agent is None
        assert rooms.set_default_agent(conn, room.id, "local-qwen").default_agent == "local-qwen"
    with store.begin() as conn, pytest.raises(InvalidState, match="default agent of room"):
        agents.remove_agent(conn, "local-qwen")
    with store.begin() as conn:
        rooms.set_default_agent(conn, room.id, None)
        agents.remove_agent(conn, "local-qwen")
        assert agents.list_agents(conn) == []
        assert rooms.get_room(conn, room.id).default_agent is None
        with pytest.raises(NotFound):
            rooms.set_default_agent(conn, 9999, None)


def test_usage_records_model_requests(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        progress.add_usage(conn, job.id, agent="openai", seconds=1.0, model_requests=4)
        progress.add_usage(conn, job.id, agent="script", seconds=0.5)
        rows = progress.usage_for_job(conn, job.id)
    assert [u.model_requests for u in rows] == [4, 0]
