"""Runners in threads of one process: what `cairn serve --workers N` runs beside the API.

Each thread is a `Runner` with its own id, so each claims jobs under leases of its own, as
separate `cairn work` processes would. Stopping sets one event: idle runners return at once,
a busy one hands its job back at the job's next stage; a lease still held when the wait is
over is released here, so another runner can take the job at once rather than when the
lease expires.
"""

from __future__ import annotations

import logging
import threading

import sqlalchemy as sa

from cairn.config import Config
from cairn.jobs.runner import Runner, new_runner_id
from cairn.stages import Status
from cairn.store import Store, leases
from cairn.store.schema import jobs

RESTART_SECONDS = 5.0
"""How long a runner thread that hit an unexpected error waits before it works again."""
_log = logging.getLogger("cairn.runner")


class RunnerPool:
    """`count` runners working in daemon threads until `stop()`."""

    def __init__(self, store: Store, config: Config, count: int) -> None:
        self.store = store
        self.stopping = threading.Event()
        self.runners = [
            Runner(store, config, runner_id=f"{new_runner_id()}:{n}", stop=self.stopping)
            for n in range(1, count + 1)
        ]
        self.threads = [
            threading.Thread(target=self._work, args=(r,), name=f"cairn-runner-{n}", daemon=True)
            for n, r in enumerate(self.runners, start=1)
        ]

    def start(self) -> None:
        """Start every runner."""
        for thread in self.threads:
            thread.start()

    def stop(self, timeout: float) -> None:
        """Stop the runners, waiting up to `timeout` seconds in all, then release what they held."""
        self.stopping.set()
        for thread in self.threads:
            if thread.ident is not None:  # started
                thread.join(timeout / max(len(self.threads), 1))
        self.release_held()

    def release_held(self) -> int:
        """Hand back every job one of these runners still holds; how many there were."""
        owners = [runner.runner_id for runner in self.runners]
        query = sa.select(jobs.c.id, jobs.c.fencing_token).where(
            jobs.c.lease_owner.in_(owners), jobs.c.status == Status.running.value
        )
        with self.store.begin() as conn:
            held = conn.execute(query).all()
            for row in held:
                leases.release(conn, row.id, row.fencing_token)
        return len(held)

    def _work(self, runner: Runner) -> None:
        while not self.stopping.is_set():
            try:
                runner.work()
            except Exception:
                # One job's unexpected failure must not end the server's runners.
                _log.exception("runner %s hit an unexpected error; it works on", runner.runner_id)
                self.stopping.wait(RESTART_SECONDS)
