"""Contention: many `cairn work` processes on one store, many jobs, people deciding meanwhile.

6 runner processes on PostgreSQL (3 on SQLite) share scripted jobs that pass the dependency
gate (a request, decided while the runners work) and the integration gate, then deliver
(push and merge). One runner is SIGKILLed halfway and replaced, so jobs change hands under
new fencing tokens. Checked from the ledgers and the repository afterwards: no job was ever
driven under two leases at once, no write under a superseded token landed, every job
completed, and every effect (each agent step, each push, each merge) happened exactly once.

CAIRN_CONTENTION_JOBS sets the number of jobs (default below).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest
import sqlalchemy as sa

from cairn.errors import InvalidState
from cairn.jobs import gates
from cairn.jobs.submit import resolve_agent, submit_job
from cairn.sanitize import Sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store
from cairn.store.schema import context_steps, effects, jobs, stage_runs

from .conftest import Cli

pytestmark = pytest.mark.acceptance

JOBS = int(os.environ.get("CAIRN_CONTENTION_JOBS", "200"))
GATED_EVERY = 5
"""Every fifth job asks for a dependency and waits at the dependency gate."""
FINISH_TIMEOUT = 900.0
"""Far beyond what the run takes; reached only when jobs stop making progress."""


def _script(n: int) -> str:
    gate = (
        "  - request_dependency:\n"
        "      ecosystem: pypi\n"
        "      name: termcolor\n"
        '      version: "2.4.0"\n'
        '      reason: "colour output"\n'
        f'  - append: {{path: "jobs/job-{n}.txt", content: "after the gate\\n"}}\n'
        if n % GATED_EVERY == 0
        else ""
    )
    return (
        "steps:\n"
        f'  - append: {{path: "jobs/job-{n}.txt", content: "job {n}\\n"}}\n'
        f"{gate}"
        f'  - finish: {{summary: "job {n}"}}\n'
    )


def _expected_file(n: int) -> str:
    return f"job {n}\nafter the gate" if n % GATED_EVERY == 0 else f"job {n}"


@dataclass
class Approver:
    """A person at the gates while the runners work: rejects dependencies, approves results."""

    store: Store
    stop: threading.Event = field(default_factory=threading.Event)
    decided: Counter[str] = field(default_factory=Counter)
    errors: list[BaseException] = field(default_factory=list)

    def run(self) -> None:
        try:
            while not self.stop.wait(0.05):
                self._decide_waiting()
        except BaseException as exc:  # reported by the test, not lost in a thread
            self.errors.append(exc)

    def _decide_waiting(self) -> None:
        with self.store.begin() as conn:
            waiting = conn.execute(
                sa.select(jobs.c.id, jobs.c.stage).where(jobs.c.status == Status.waiting.value)
            ).all()
        for job_id, stage in waiting:
            try:
                with self.store.begin() as conn:
                    if stage == Stage.awaiting_dependency_approval.value:
                        # Rejected, not approved: approval would install from the network.
                        gates.reject(conn, job_id, "admin", "not this time")
                    else:
                        gates.approve(conn, job_id, "admin")
                self.decided[stage] += 1
            except InvalidState:
                pass  # it moved meanwhile; the next round sees where it is now


def _submit(store: Store, cli: Cli, numbers: range) -> list[int]:
    ids = []
    with store.begin() as conn:
        for n in numbers:
            agent = resolve_agent(conn, "sample", f"script:{cli.script(_script(n))}")
            job = submit_job(
                conn,
                room="sample",
                text=f"job {n}",
                agent=agent,
                actor="alice",
                sanitizer=Sanitizer(environ={}),
            )
            ids.append(job.id)
    return ids


@pytest.fixture
def opened(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Store]]:
    stores: list[Store] = []

    def open_store(url: str) -> Store:
        stores.append(Store.open(url))
        return stores[-1]

    yield open_store
    for store in stores:
        store.close()


def _contend(
    cli: Cli,
    url: str,
    runner_count: int,
    background: Callable[..., Popen[bytes]],
    open_store: Callable[[str], Store],
) -> None:
    cli.room()
    store = open_store(url)
    numbers = range(1, JOBS + 1)
    half = JOBS // 2
    ids = _submit(store, cli, numbers[:half])
    runners = [background("work") for _ in range(runner_count)]
    approver = Approver(open_store(url))
    deciding = threading.Thread(target=approver.run, daemon=True)
    deciding.start()
    ids += _submit(store, cli, numbers[half:])  # submitted while the runners work

    _wait(store, lambda done: done >= half, "half of the jobs to complete")
    victim = runners.pop(0)
    os.killpg(victim.pid, signal.SIGKILL)  # its jobs change hands once their leases run out
    victim.wait()
    runners.append(background("work"))
    _wait(store, lambda done: done == JOBS, "every job to complete")

    approver.stop.set()
    deciding.join()
    assert not approver.errors, approver.errors
    for runner in runners:
        os.killpg(runner.pid, signal.SIGTERM)
    assert [runner.wait(timeout=60) for runner in runners] == [143] * len(runners)

    with store.begin() as conn:
        _check_jobs(conn, ids)
        _check_fencing(conn, ids)
        _check_effects(conn, ids)
    gated = len([n for n in numbers if n % GATED_EVERY == 0])
    assert approver.decided[Stage.awaiting_dependency_approval.value] == gated
    assert approver.decided[Stage.awaiting_review.value] == JOBS
    _check_repository(cli, numbers)


def _wait(store: Store, until: Callable[[int], bool], what: str) -> None:
    deadline = time.monotonic() + FINISH_TIMEOUT
    while True:
        with store.begin() as conn:
            rows = conn.execute(sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status))
            counts = {status: count for status, count in rows}
        wrong = _ended_wrongly(store)
        assert not wrong, f"jobs ended wrongly while waiting for {what}: {counts} {wrong}"
        if until(counts.get(Status.completed.value, 0)):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}: {counts}")
        time.sleep(0.2)


def _ended_wrongly(store: Store) -> list[tuple[int, str, str, str | None]]:
    """Jobs that ended otherwise than completed: id, status, stage and diagnosis."""
    ended = ("failed", "blocked", "cancelled", "rejected")
    query = sa.select(jobs.c.id, jobs.c.status, jobs.c.stage, jobs.c.diagnosis)
    with store.begin() as conn:
        return [tuple(row) for row in conn.execute(query.where(jobs.c.status.in_(ended)))]


def _check_jobs(conn: sa.Connection, ids: list[int]) -> None:
    rows = conn.execute(sa.select(jobs).where(jobs.c.id.in_(ids))).all()
    assert len(rows) == len(ids)
    wrong = [(r.id, r.status, r.stage, r.diagnosis) for r in rows if r.status != "completed"]
    assert not wrong, wrong
    assert all(r.lease_owner is None for r in rows)


def _check_fencing(conn: sa.Connection, ids: list[int]) -> None:
    """Per job, every fenced write in the order it landed carries a token no older than the
    one before it, and a token's writes all precede the next token's first write."""
    writes: dict[int, list[tuple[Any, int, str]]] = {job: [] for job in ids}
    runs = sa.select(stage_runs.c.job_id, stage_runs.c.started_at, stage_runs.c.ended_at)
    for job_id, started, ended, token in conn.execute(
        runs.add_columns(stage_runs.c.fencing_token).order_by(stage_runs.c.id)
    ):
        writes[job_id].append((started, token, "stage started"))
        if ended is not None:
            writes[job_id].append((ended, token, "stage ended"))
    steps = sa.select(context_steps.c.job_id, context_steps.c.at, context_steps.c.fencing_token)
    for job_id, at, token in conn.execute(steps.order_by(context_steps.c.id)):
        writes[job_id].append((at, token, "context step"))
    for job_id, landed in writes.items():
        assert landed, f"job {job_id} has no fenced writes"
        landed.sort(key=lambda write: (write[0], write[1]))
        tokens = [token for _, token, _ in landed]
        assert tokens == sorted(tokens), (
            f"job {job_id}: a write under a superseded token landed after a newer one "
            f"(two leases overlapped): {landed}"
        )
    # And in id order per table, which no clock can reorder.
    for table in (stage_runs, context_steps):
        seen: dict[int, int] = {}
        for job_id, token in conn.execute(
            sa.select(table.c.job_id, table.c.fencing_token).order_by(table.c.id)
        ):
            assert token >= seen.get(job_id, 0), f"job {job_id}: stale token in {table.name}"
            seen[job_id] = token


def _check_effects(conn: sa.Connection, ids: list[int]) -> None:
    rows = conn.execute(
        sa.select(effects.c.job_id, effects.c.kind).where(effects.c.status == "done")
    )
    done = Counter((job_id, kind) for job_id, kind in rows)
    wrong = {
        job: (done[(job, "push")], done[(job, "merge")])
        for job in ids
        if (done[(job, "push")], done[(job, "merge")]) != (1, 1)
    }
    assert not wrong, f"jobs whose push or merge did not happen exactly once: {wrong}"
    intended = conn.execute(sa.select(sa.func.count()).where(effects.c.status != "done"))
    assert intended.scalar() == 0
    # Delivering is never reused: a drive cut off between its acceptance and the job's
    # completion (the SIGKILLed runner's) is delivered again under the next lease, which
    # finds the push and the merge done. So a job may have a second acceptance, never two
    # under one lease.
    accepted = Counter(
        conn.execute(
            sa.select(stage_runs.c.job_id, stage_runs.c.fencing_token).where(
                stage_runs.c.stage == Stage.delivering.value, stage_runs.c.status == "accepted"
            )
        ).all()
    )
    assert set(accepted.values()) == {1}, "two acceptances under one lease"
    assert {job_id for job_id, _ in accepted} == set(ids)


def _check_repository(cli: Cli, numbers: range) -> None:
    """Each job's file is on main once, as its agent wrote it, each step run once."""
    files = cli.git("ls-tree", "-r", "--name-only", "main", "jobs").split()
    assert sorted(files) == sorted(f"jobs/job-{n}.txt" for n in numbers)
    for n in numbers:
        assert cli.git("show", f"main:jobs/job-{n}.txt") == _expected_file(n), n
    merges = int(cli.git("rev-list", "--merges", "--count", "main"))
    assert merges <= len(numbers)
    # One commit per job and its merge (when not a fast-forward) over the starter commit.
    assert cli.git("rev-list", "--count", "main") == str(1 + len(numbers) + merges)
    assert cli.git("status", "--porcelain") == ""


@pytest.mark.postgres
def test_six_runners_on_postgres_drive_every_job_once(
    pg_cli: Cli,
    postgres_url: str,
    background: Callable[..., Popen[bytes]],
    opened: Callable[[str], Store],
) -> None:
    _contend(pg_cli, postgres_url, 6, background, opened)


def test_three_runners_on_sqlite_drive_every_job_once(
    cli: Cli, background: Callable[..., Popen[bytes]], opened: Callable[[str], Store]
) -> None:
    _contend(cli, f"sqlite:///{Path(cli.home) / 'cairn.db'}", 3, background, opened)
