"""The engine's write shapes in the store, on both backends: an effect-free stage's recipe and
outcome in one fenced write, reused runs marked in one batch, and resumes after a crash at
each boundary between them (simulated at the engine's fault points)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from tests.store.test_contract import claimed, submit_jobs

from cairn.engine import (
    Engine,
    Evidence,
    Expect,
    Faults,
    Measurement,
    Result,
    RunStatus,
    Snapshot,
    StageDef,
    Workflow,
)
from cairn.errors import LeaseLost, StoreError
from cairn.jobs.ledger import StoreLedger
from cairn.store import Store, leases
from cairn.store import stage_runs as stage_run_ledger
from cairn.store.records import Job, StageRun
from cairn.store.schema import stage_runs as stage_runs_table

HOLDS = Evidence.of(Measurement("done", 1, Expect.equals, 1))
LATER = timedelta(hours=1)


class Crash(Exception):
    """Stands in for the runner dying at a fault point."""


def crash_at(rule: str) -> Faults:
    faults = Faults.parse(f"crash:{rule}")

    def die(_code: int) -> None:
        raise Crash(rule)

    faults.die = die
    return faults


def workflow(names: str, *, effect_free: bool = True) -> Workflow[None]:
    def stage(name: str) -> StageDef[None]:
        return StageDef(
            name,
            run=lambda ctx, upstream: Result(f"content-{name}", HOLDS),
            required=("done",),
            content_now=lambda ctx, prior: f"content-{name}",
            effect_free=effect_free,
        )

    return Workflow("w", tuple(stage(name) for name in names))


def runs(store: Store, job: Job) -> list[StageRun]:
    with store.begin() as conn:
        return stage_run_ledger.for_job(conn, job.id)


def shape(store: Store, job: Job) -> list[tuple[str, int, str]]:
    return [(run.stage, run.attempt, run.status.value) for run in runs(store, job)]


def take_over(store: Store, runner: str, hours: int, job_id: int | None = None) -> StoreLedger:
    """A new runner claims the job, `hours` from now, when the last one's lease has run out."""
    job = claimed(store, runner, now=datetime.now(UTC) + hours * LATER, job_id=job_id)
    return StoreLedger(store, job.id, job.fencing_token)


def left_running_at_b(store: Store) -> Job:
    """A job whose runner died in stage b, which acts: its intent is left `running`."""
    (job,) = submit_jobs(store)
    with pytest.raises(Crash):
        Engine.starting(take_over(store, "runner-a", 0), faults=crash_at("before_accept:b")).drive(
            workflow("ab", effect_free=False), None
        )
    return job


def test_record_writes_recipe_and_outcome_in_one_row_and_abandons_a_cut_off_attempt(
    store: Store,
) -> None:
    (job,) = submit_jobs(store)
    with store.begin() as conn:
        cut_off = stage_run_ledger.start(conn, job.id, "verifying", "recipe-1", 1)
        done = stage_run_ledger.record(
            conn,
            job.id,
            "verifying",
            "recipe-2",
            1,
            status=RunStatus.accepted,
            content_id="c" * 40,
            evidence={"done": 1},
        )
        abandoned = stage_run_ledger.get(conn, cut_off.id)
        with pytest.raises(ValueError, match="use start"):
            stage_run_ledger.record(
                conn,
                job.id,
                "verifying",
                "recipe-3",
                1,
                status=RunStatus.running,
                content_id=None,
                evidence=None,
            )
    assert abandoned.status is RunStatus.abandoned
    assert (done.attempt, done.recipe_id, done.status) == (2, "recipe-2", RunStatus.accepted)
    assert (done.content_id, done.evidence, done.fencing_token) == ("c" * 40, {"done": 1}, 1)
    assert done.ended_at is not None and done.ended_at == done.started_at
    assert runs(store, job) == [abandoned, done]


def test_a_stale_token_is_refused_by_the_combined_write_and_nothing_lands(store: Store) -> None:
    (job,) = submit_jobs(store)
    stale = claimed(store, "runner-a", now=datetime.now(UTC) - LATER)
    current = claimed(store, "runner-b")
    ledger = StoreLedger(store, job.id, stale.fencing_token)
    with pytest.raises(LeaseLost, match=f"job {job.id} is now held by another runner"):
        ledger.record("verifying", "recipe", RunStatus.accepted, "content", HOLDS)
    assert runs(store, job) == []
    StoreLedger(store, job.id, current.fencing_token).record(
        "verifying", "recipe", RunStatus.accepted, "content", HOLDS
    )
    assert shape(store, job) == [("verifying", 1, "accepted")]


def test_reused_runs_are_marked_in_one_write_all_or_none(store: Store) -> None:
    one, two = submit_jobs(store, 2)
    first = claimed(store, job_id=one.id)
    ledger = StoreLedger(store, one.id, first.fencing_token)
    records = [ledger.record(s, f"r-{s}", RunStatus.accepted, f"c-{s}", HOLDS) for s in "abc"]
    failed = ledger.record("d", "r-d", RunStatus.failed, None, HOLDS)
    other = claimed(store, job_id=two.id)
    foreign = StoreLedger(store, two.id, other.fencing_token).record(
        "a", "r-a", RunStatus.accepted, "c-a", HOLDS
    )
    for bad in (foreign, failed):
        with pytest.raises(StoreError, match="none was marked reused"):
            ledger.mark_reused([*records, bad])
        assert [run.reused_at for run in runs(store, one)] == [None] * 4
    newer = take_over(store, "runner-b", 2, one.id)
    with pytest.raises(LeaseLost):
        ledger.mark_reused(records)
    assert [run.reused_at for run in runs(store, one)] == [None] * 4
    newer.mark_reused(records)
    marked = [run.reused_at for run in runs(store, one)]
    assert all(at is not None for at in marked[:3]) and marked[3] is None
    assert len(set(marked[:3])) == 1, "one write marked them all"


@pytest.mark.parametrize(
    ("rule", "resumed_ran"),
    [("before_accept:c", ["c", "d"]), ("after_accept:c", ["d"])],
)
def test_a_crash_around_an_effect_free_write_resumes_with_every_stage_accepted_once(
    store: Store, rule: str, resumed_ran: list[str]
) -> None:
    (job,) = submit_jobs(store)
    with pytest.raises(Crash):
        Engine.starting(take_over(store, "runner-a", 0), faults=crash_at(rule)).drive(
            workflow("abcd"), None
        )
    report = Engine.starting(take_over(store, "runner-b", 2)).drive(workflow("abcd"), None)
    assert report.ran == resumed_ran
    assert shape(store, job) == [(s, 1, "accepted") for s in "abcd"]


def test_a_crash_after_the_intent_of_a_stage_that_acts_leaves_it_known_and_abandoned_later(
    store: Store,
) -> None:
    job = left_running_at_b(store)
    assert shape(store, job) == [("a", 1, "accepted"), ("b", 1, "running")]
    report = Engine.starting(take_over(store, "runner-b", 2)).drive(
        workflow("ab", effect_free=False), None
    )
    assert (report.reused, report.ran) == (["a"], ["b"])
    assert shape(store, job) == [("a", 1, "accepted"), ("b", 1, "abandoned"), ("b", 2, "accepted")]


def test_a_write_looks_for_a_cut_off_attempt_only_where_the_runs_read_left_one(
    store: Store,
) -> None:
    job = left_running_at_b(store)
    looked: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if statement.startswith("UPDATE stage_runs") and "stage_runs.stage =" in statement:
            looked.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", note)
    try:
        report = Engine.starting(take_over(store, "runner-b", 2)).drive(
            workflow("abcd", effect_free=False), None
        )
        Engine.starting(take_over(store, "runner-c", 4)).drive(workflow("abcde"), None)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", note)
    assert (report.reused, report.ran) == (["a"], ["b", "c", "d"])
    assert shape(store, job) == [
        ("a", 1, "accepted"), ("b", 1, "abandoned"), ("b", 2, "accepted"),
        ("c", 1, "accepted"), ("d", 1, "accepted"), ("e", 1, "accepted"),
    ]  # fmt: skip
    if store.dialect == "sqlite":  # PostgreSQL's one statement looks at no extra cost
        assert len(looked) == 1, "only b's intent looked for an attempt to abandon"


def test_a_ledger_that_read_no_runs_looks_before_every_write(store: Store) -> None:
    job = left_running_at_b(store)
    unread = take_over(store, "runner-b", 2)  # no snapshot taken: it knows nothing
    unread.record("b", "recipe", RunStatus.accepted, "content-b", HOLDS)
    assert shape(store, job) == [("a", 1, "accepted"), ("b", 1, "abandoned"), ("b", 2, "accepted")]


def test_a_ledger_never_loses_track_of_an_attempt_it_left_running(store: Store) -> None:
    (job,) = submit_jobs(store)
    ledger = take_over(store, "runner-a", 0)
    Snapshot.take(ledger)  # no runs yet: nothing for any write to look for
    # An older attempt's outcome does not settle a newer one still running.
    first = ledger.start("b", "recipe")
    ledger.start("b", "recipe")
    ledger.finish(first, RunStatus.failed, None, HOLDS)
    ledger.record("b", "recipe", RunStatus.accepted, "content-b", HOLDS)
    # A run finished as running again is looked for again.
    fourth = ledger.start("c", "recipe")
    ledger.finish(fourth, RunStatus.paused, None, HOLDS)
    ledger.finish(fourth, RunStatus.running, None, HOLDS)
    ledger.record("c", "recipe", RunStatus.accepted, "content-c", HOLDS)
    assert shape(store, job) == [
        ("b", 1, "failed"), ("b", 2, "abandoned"), ("b", 3, "accepted"),
        ("c", 1, "abandoned"), ("c", 2, "accepted"),
    ]  # fmt: skip


@pytest.mark.parametrize(("rule", "marked"), [("before_reuse:c", 0), ("after_reuse:c", 3)])
def test_a_crash_at_the_reuse_batch_marks_all_or_none_and_the_next_resume_finishes(
    store: Store, rule: str, marked: int
) -> None:
    (job,) = submit_jobs(store)
    Engine.starting(take_over(store, "runner-a", 0)).drive(workflow("abc"), None)
    longer = workflow("abcd")
    with pytest.raises(Crash):
        Engine.starting(take_over(store, "runner-b", 2), faults=crash_at(rule)).drive(longer, None)
    assert sum(run.reused_at is not None for run in runs(store, job)) == marked
    report = Engine.starting(take_over(store, "runner-c", 4)).drive(longer, None)
    assert (report.reused, report.ran) == (["a", "b", "c"], ["d"])
    assert all(run.reused_at is not None for run in runs(store, job)[:3])
    assert shape(store, job) == [(s, 1, "accepted") for s in "abcd"]


def test_a_stale_token_is_refused_by_the_fenced_start_and_finish(store: Store) -> None:
    (job,) = submit_jobs(store)
    first = claimed(store, "runner-a", now=datetime.now(UTC) - LATER)
    stale = StoreLedger(store, job.id, first.fencing_token)
    run = stale.start("verifying", "recipe")
    current = StoreLedger(store, job.id, claimed(store, "runner-b").fencing_token)
    with pytest.raises(LeaseLost):
        stale.start("summarizing", "recipe")
    with pytest.raises(LeaseLost):
        stale.finish(run, RunStatus.accepted, "content", HOLDS)
    assert shape(store, job) == [("verifying", 1, "running")]
    with store.begin() as conn:
        no_evidence = conn.execute(
            sa.select(sa.func.count()).where(stage_runs_table.c.evidence.is_(None))
        ).scalar_one()
    assert no_evidence == 1, "a run without evidence holds SQL NULL, not JSON null"
    current.finish(run, RunStatus.accepted, "content", HOLDS)
    (done,) = runs(store, job)
    assert (done.status, done.content_id, done.evidence) == (
        RunStatus.accepted,
        "content",
        HOLDS.to_data(),
    )


def test_a_combined_write_racing_a_claim_waits_for_it_and_is_refused(store: Store) -> None:
    (job,) = submit_jobs(store)
    first = claimed(store, "runner-a", now=datetime.now(UTC) - LATER)
    ledger = StoreLedger(store, job.id, first.fencing_token)
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            ledger.record("verifying", "recipe", RunStatus.accepted, "content", HOLDS)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with store.begin() as conn:  # runner-b's claim, holding the job row until it commits
        newer = leases.claim(conn, "runner-b", 60, job_id=job.id)
        assert newer is not None
        racer = threading.Thread(target=write)
        racer.start()
        racer.join(timeout=1.0)  # the write reaches the database while the claim is open
    racer.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], LeaseLost)
    assert runs(store, job) == []
