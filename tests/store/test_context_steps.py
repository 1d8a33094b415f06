"""The conversation ledger's contract, on SQLite and on PostgreSQL (the `store` fixture).

A job's conversation is append-only, numbered from 1, written only under the job's current
fencing token, one step after the other, and never visible from another job.
"""

from __future__ import annotations

import inspect
import threading
from datetime import UTC, datetime, timedelta

import pytest
from tests.store.test_contract import claimed, submit_jobs

from cairn.errors import ContextConflict, LeaseLost, NotFound
from cairn.stages import Stage, Status
from cairn.store import Store
from cairn.store import context_steps as conversation
from cairn.store import jobs as job_ledger
from cairn.store.records import ContextStep, Job, StepKind

LONG_AGO = datetime.now(UTC) - timedelta(hours=1)


def say(store: Store, job: Job, seq: int, kind: StepKind, **payload: object) -> ContextStep:
    with store.fenced(job.id, job.fencing_token) as conn:
        return conversation.append(conn, job.id, job.fencing_token, seq, kind, payload)


def saved(store: Store, job_id: int) -> list[tuple[int, StepKind, dict[str, object]]]:
    with store.begin() as conn:
        return [(s.seq, s.kind, s.payload) for s in conversation.steps(conn, job_id)]


def test_a_job_without_steps_has_an_empty_conversation(store: Store) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        assert conversation.steps(conn, job.id) == []
        assert conversation.last_step(conn, job.id) is None


def test_steps_are_read_back_in_order_with_their_payload_and_writer(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    say(store, job, 1, StepKind.system, content="you edit code")
    say(store, job, 2, StepKind.request, content="add a test")
    calls = [{"id": "c1", "name": "write_file", "arguments": {"path": "t.py", "content": "x"}}]
    answer = say(store, job, 3, StepKind.assistant, content=None, tool_calls=calls)
    result = say(store, job, 4, StepKind.tool_result, call_id="c1", content="written")
    assert answer.payload == {"content": None, "tool_calls": calls}
    assert saved(store, job.id) == [
        (1, StepKind.system, {"content": "you edit code"}),
        (2, StepKind.request, {"content": "add a test"}),
        (3, StepKind.assistant, {"content": None, "tool_calls": calls}),
        (4, StepKind.tool_result, {"call_id": "c1", "content": "written"}),
    ]
    with store.begin() as conn:
        assert conversation.last_step(conn, job.id) == result
        assert [s.seq for s in conversation.steps(conn, job.id, after=2)] == [3, 4]
    assert (result.job_id, result.fencing_token, result.at.tzinfo) == (job.id, 1, UTC)


def test_a_step_that_is_not_the_next_one_is_refused_and_writes_nothing(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    with pytest.raises(ContextConflict, match="saved up to step 0, so step 2 cannot follow"):
        say(store, job, 2, StepKind.request, content="skipped one")
    say(store, job, 1, StepKind.request, content="first")
    for wrong in (1, 3, 0, -1):
        with pytest.raises(ContextConflict, match="reload the conversation"):
            say(store, job, wrong, StepKind.note, content="out of order")
    assert saved(store, job.id) == [(1, StepKind.request, {"content": "first"})]


def test_a_superseded_fencing_token_cannot_write_and_the_new_runner_continues(
    store: Store,
) -> None:
    submit_jobs(store)
    old = claimed(store, "runner-a", now=LONG_AGO)
    say(store, old, 1, StepKind.request, content="the request")
    new = claimed(store, "runner-b")  # the old lease expired long ago: a new token
    with store.begin() as conn:
        # The fenced transaction is the runner's way in, but the ledger checks on its own too.
        with pytest.raises(LeaseLost, match="may not write its conversation"):
            conversation.append(conn, old.id, old.fencing_token, 2, StepKind.note, {})
        with pytest.raises(LeaseLost):
            conversation.replace(conn, old.id, old.fencing_token, [])
        last = conversation.last_step(conn, new.id)
    assert last is not None
    say(store, new, last.seq + 1, StepKind.assistant, content="resumed")
    assert [(seq, token) for seq, token in _writers(store, new.id)] == [
        (1, old.fencing_token),
        (2, new.fencing_token),
    ]


def test_a_job_that_is_not_running_takes_no_steps(store: Store) -> None:
    submit_jobs(store)
    job = claimed(store)
    with store.begin() as conn:
        job_ledger.transition(conn, job, Stage.awaiting_review, Status.waiting)
        with pytest.raises(LeaseLost, match="waits for a person"):
            conversation.append(conn, job.id, job.fencing_token, 1, StepKind.follow_up, {})
        with pytest.raises(NotFound, match="no job 999"):
            conversation.append(conn, 999, 1, 1, StepKind.note, {})
    assert saved(store, job.id) == []


def test_each_job_numbers_and_reads_only_its_own_steps(store: Store) -> None:
    submit_jobs(store, 3)
    job_a, job_b, job_c = (claimed(store, f"runner-{n}") for n in "abc")
    say(store, job_a, 1, StepKind.request, content="secret of A")
    say(store, job_b, 1, StepKind.request, content="B")
    say(store, job_a, 2, StepKind.assistant, content="A again")
    say(store, job_b, 2, StepKind.assistant, content="B again")
    assert saved(store, job_a.id) == [
        (1, StepKind.request, {"content": "secret of A"}),
        (2, StepKind.assistant, {"content": "A again"}),
    ]
    assert [payload for _, _, payload in saved(store, job_b.id)] == [
        {"content": "B"},
        {"content": "B again"},
    ]
    assert saved(store, job_c.id) == []


def test_replace_starts_the_job_afresh_and_leaves_other_jobs_alone(store: Store) -> None:
    submit_jobs(store, 2)
    job, other = claimed(store, "runner-a"), claimed(store, "runner-b")
    for seq in (1, 2, 3):
        say(store, job, seq, StepKind.note, content=f"old {seq}")
    say(store, other, 1, StepKind.request, content="other")
    with store.fenced(job.id, job.fencing_token) as conn:
        opening = conversation.replace(
            conn,
            job.id,
            job.fencing_token,
            [(StepKind.system, {"content": "sys"}), (StepKind.request, {"content": "again"})],
        )
    assert [(s.seq, s.kind) for s in opening] == [(1, StepKind.system), (2, StepKind.request)]
    say(store, job, 3, StepKind.follow_up, content="the reviewer's message")
    assert [payload["content"] for _, _, payload in saved(store, job.id)] == [
        "sys",
        "again",
        "the reviewer's message",
    ]
    assert saved(store, other.id) == [(1, StepKind.request, {"content": "other"})]


def test_runners_appending_to_one_job_at_once_each_land_once_and_in_order(
    store: Store, store_url: str
) -> None:
    # Each writer reads the last step and appends the next inside one fenced transaction,
    # as the agent loop does; the job-row lock (SQLite: BEGIN IMMEDIATE) puts them in line.
    submit_jobs(store)
    job = claimed(store)
    writers, steps_each = 4, 6
    start = threading.Barrier(writers)
    won: list[int] = []
    failures: list[BaseException] = []

    def write() -> None:
        own = Store.open(store_url)
        try:
            start.wait(timeout=30)
            for _ in range(steps_each):
                with own.fenced(job.id, job.fencing_token) as conn:
                    last = conversation.last_step(conn, job.id)
                    seq = (last.seq if last else 0) + 1
                    conversation.append(conn, job.id, job.fencing_token, seq, StepKind.note, {})
                won.append(seq)
        except BaseException as exc:  # reported below, not lost in the thread
            failures.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert sorted(won) == list(range(1, writers * steps_each + 1))
    assert [seq for seq, _ in _writers(store, job.id)] == sorted(won)


def test_the_ledger_is_keyed_by_job_id_alone() -> None:
    # Rule 1: nothing here can find a conversation by room, agent or "the last one".
    for name in ("append", "replace", "steps", "last_step"):
        parameters = list(inspect.signature(getattr(conversation, name)).parameters)
        assert parameters[:2] == ["conn", "job_id"], name
        assert not {"room", "room_id", "agent"} & set(parameters), name


def _writers(store: Store, job_id: int) -> list[tuple[int, int]]:
    with store.begin() as conn:
        return [(s.seq, s.fencing_token) for s in conversation.steps(conn, job_id)]
