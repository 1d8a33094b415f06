"""A runner: claims runnable jobs under a lease, keeps the lease alive, drives each job."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from types import FrameType

import sqlalchemy as sa

from cairn.config import Config
from cairn.engine import NO_FAULTS, Faults
from cairn.jobs.checkpoints import host_of
from cairn.jobs.drive import Drive, ProgressCallback
from cairn.jobs.workflow import CODE_JOB, RUN_GATE
from cairn.sanitize import user_sanitizer
from cairn.stages import Status
from cairn.store import Store, leases, workspace_hosts
from cairn.store.records import Job
from cairn.store.schema import jobs

IDLE_POLL_SECONDS = 0.5
_log = logging.getLogger("cairn.runner")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: a stopped runner hands its job back the same way."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, the first SIGTERM raises `Terminated` in the main thread."""

    def stop(signum: int, frame: FrameType | None) -> None:
        # Ignored from now on: a second SIGTERM must not cut short the release of the lease.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def new_runner_id() -> str:
    """A runner id unique across hosts and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Runner:
    """Claims jobs one at a time and drives each until it reaches a gate, a block or an end."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        runner_id: str | None = None,
        on_progress: ProgressCallback | None = None,
        on_idle: Callable[[], None] | None = None,
        faults: Faults = NO_FAULTS,
        wait_for_work: Callable[[], object] | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.faults = faults
        self.config = config
        self.runner_id = runner_id or new_runner_id()
        self.host = host_of(config)
        """Where this runner's workspaces live; jobs whose workspace is here prefer it."""
        self.on_progress = on_progress
        self.on_idle = on_idle or (lambda: None)
        """Called once each time the runner starts waiting for work, not on every poll."""
        self.wait_for_work = wait_for_work or (lambda: time.sleep(IDLE_POLL_SECONDS))
        """Returns when there may be work: a wake-up (cairn.store.wakeups) or a poll interval."""
        self.stopping = stopping or threading.Event()
        """Set by whoever stops the runner (another thread): it claims nothing more, and the
        job in flight is handed back at its next stage."""

    def work(self, *, until_idle: bool = False, job_id: int | None = None) -> list[Job]:
        """Drive jobs until stopped; with `until_idle`, until nothing is queued or in flight."""
        driven: list[Job] = []
        waiting = False
        while not self.stopping.is_set():
            if job_id is None:  # `cairn run` works on its one job; `cairn work` fires schedules
                self._fire_schedules()
                self._close_rejected()
            with self.store.begin() as conn:
                job = leases.claim(
                    conn,
                    self.runner_id,
                    self.config.lease_seconds,
                    job_id=job_id,
                    defer=self._held_elsewhere,
                )
            if job is not None:
                waiting = False
                driven.append(self.drive(job))
                continue
            if until_idle and not self._in_flight(job_id):
                return driven
            if not waiting:
                waiting = True
                self.on_idle()
            self.wait_for_work()
        return driven

    def _held_elsewhere(self, conn: sa.Connection, now: datetime) -> sa.ColumnElement[bool]:
        """Affinity: jobs whose workspace is on another live host wait a little for it."""
        if self.config.affinity_seconds <= 0:
            return sa.false()
        return workspace_hosts.held_elsewhere(
            conn, self.host, now, wait_seconds=self.config.affinity_seconds
        )

    def _fire_schedules(self) -> None:
        """Submit the scheduled jobs now due (one per schedule and fire time, whoever fires)."""
        from cairn.jobs.schedules import fire_due

        try:
            fired = fire_due(self.store, user_sanitizer(self.config))
        except Exception:
            # A schedule that cannot fire now must not stop the runner's jobs; it is retried.
            _log.exception("could not fire the due schedules; trying again on the next poll")
            return
        for firing in fired:
            _log.info("schedule %s fired for %s", firing.schedule_id, firing.fire_at)

    def _close_rejected(self) -> None:
        """Close the pull requests of jobs rejected at review (each with its reason)."""
        from cairn.jobs.forge_reject import close_rejected

        try:
            close_rejected(self.store, self.config)
        except Exception:
            _log.exception("could not close rejected jobs' pull requests; trying again later")

    def drive(self, job: Job) -> Job:
        """Drive one claimed job, renewing its lease from a heartbeat thread."""
        lost = threading.Event()
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, lost, done), daemon=True)
        beat.start()
        try:
            drive = Drive(
                self.store,
                self.config,
                job,
                on_progress=self.on_progress,
                stop_requested=lambda: lost.is_set() or self.stopping.is_set(),
                faults=self.faults,
            )
            return drive.run(RUN_GATE, CODE_JOB)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM within `sigterm_interrupts`
            # Stopped by its operator: hand the job back now rather than when the lease expires.
            with contextlib.suppress(Exception), self.store.begin() as conn:
                leases.release(conn, job.id, job.fencing_token)
            raise
        finally:
            done.set()
            beat.join()
            if self.stopping.is_set():  # stopped from another thread: hand the job back now
                with contextlib.suppress(Exception), self.store.begin() as conn:
                    leases.release(conn, job.id, job.fencing_token)

    def _heartbeat(self, job: Job, lost: threading.Event, done: threading.Event) -> None:
        """Renew the lease; once it cannot be renewed before it expires, the job is lost."""
        interval = self.config.lease_seconds / 3
        held_until = time.monotonic() + self.config.lease_seconds
        while not done.wait(interval):
            try:
                with self.store.begin() as conn:
                    held = leases.renew(conn, job.id, job.fencing_token, self.config.lease_seconds)
            except Exception:
                _log.warning("could not renew the lease of job %s; retrying", job.id)
                held = time.monotonic() < held_until - interval
                if held:
                    continue
            if not held:
                lost.set()
                return
            held_until = time.monotonic() + self.config.lease_seconds

    def _in_flight(self, job_id: int | None) -> bool:
        """Whether any job is queued or held by a runner (whose lease may yet expire)."""
        active = [Status.queued.value, Status.running.value]
        query = sa.select(sa.func.count()).select_from(jobs).where(jobs.c.status.in_(active))
        if job_id is not None:
            query = query.where(jobs.c.id == job_id)
        with self.store.read() as conn:
            return bool(conn.execute(query).scalar())
