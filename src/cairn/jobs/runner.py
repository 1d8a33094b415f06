"""A runner: claims runnable jobs under a lease, keeps the lease alive, drives each job."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from cairn.config import Config
from cairn.jobs.drive import Drive, ProgressCallback
from cairn.jobs.workflow import HANDLERS
from cairn.sanitize import Sanitizer
from cairn.stages import Status
from cairn.store import Store, leases
from cairn.store.records import Job
from cairn.store.schema import jobs

IDLE_POLL_SECONDS = 0.5


def new_runner_id() -> str:
    """A runner id unique across hosts and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def user_sanitizer(config: Config) -> Sanitizer:
    """The sanitizer every user-visible text of this installation goes through."""
    return Sanitizer(
        paths={"<cairn-home>": config.home, "<workspaces>": config.workspaces_dir, "~": Path.home()}
    )


class Runner:
    """Claims jobs one at a time and drives each until it reaches a gate, a block or an end."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        runner_id: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.runner_id = runner_id or new_runner_id()
        self.on_progress = on_progress
        self.sanitizer = user_sanitizer(config)

    def work(self, *, until_idle: bool = False, job_id: int | None = None) -> list[Job]:
        """Drive jobs until stopped; with `until_idle`, until nothing is queued or in flight."""
        driven: list[Job] = []
        while True:
            with self.store.begin() as conn:
                job = leases.claim(conn, self.runner_id, self.config.lease_seconds, job_id=job_id)
            if job is not None:
                driven.append(self.drive(job))
                continue
            if until_idle and not self._in_flight(job_id):
                return driven
            time.sleep(IDLE_POLL_SECONDS)

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
                sanitizer=self.sanitizer,
                on_progress=self.on_progress,
                stop_requested=lost.is_set,
            )
            return drive.run(HANDLERS)
        finally:
            done.set()
            beat.join()

    def _heartbeat(self, job: Job, lost: threading.Event, done: threading.Event) -> None:
        interval = self.config.lease_seconds / 3
        while not done.wait(interval):
            with self.store.begin() as conn:
                held = leases.renew(conn, job.id, job.fencing_token, self.config.lease_seconds)
            if not held:
                lost.set()
                return

    def _in_flight(self, job_id: int | None) -> bool:
        """Whether any job is queued or held by a runner (whose lease may yet expire)."""
        active = [Status.queued.value, Status.running.value]
        query = sa.select(sa.func.count()).select_from(jobs).where(jobs.c.status.in_(active))
        if job_id is not None:
            query = query.where(jobs.c.id == job_id)
        with self.store.begin() as conn:
            return bool(conn.execute(query).scalar())
