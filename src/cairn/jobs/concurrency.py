"""One `cairn work` process: up to N runner threads, entered in the runners ledger.

Each thread claims and drives its own job under its own lease and fencing token, on its own
pooled connection; the job's real work (git, agents, commands) runs in subprocesses, so the
threads mostly wait. Several such processes, on one host or many, share the work through the
leases alone. The process is one runner in `cairn runners`: it beats its heartbeat every
third of a lease, and a clean stop hands back every job it holds and leaves the ledger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable

from cairn.config import Config
from cairn.engine import NO_FAULTS, Faults
from cairn.jobs.checkpoints import host_of
from cairn.jobs.drive import ProgressCallback
from cairn.jobs.runner import Runner, new_runner_id
from cairn.store import Store
from cairn.store import runners as runner_ledger
from cairn.store.records import Job
from cairn.store.wakeups import Wakeups, open_wakeups

MAX_CONCURRENCY = 64


def connections_needed(concurrency: int) -> int:
    """Pooled connections a process of `concurrency` threads may hold at once.

    Each thread drives a job on one and renews its lease on another, and the process beats
    its own heartbeat; a smaller pool would make a lease renewal wait for a connection.
    """
    return 2 * concurrency + 2


STOP_GRACE_SECONDS = 10.0
"""How long a stopping process waits for its threads to notice their jobs were handed back."""
LEASE_EXPIRY_MARGIN = 0.05
"""Claim this long after a lease runs out, so the claim sees it expired."""
_log = logging.getLogger("cairn.runner")


class _Idle:
    """Says "waiting" once when no thread of the process drives a job, not once per thread."""

    def __init__(self, announce: Callable[[], None]) -> None:
        self.announce = announce
        self.busy = 0
        self.announced = False
        self.lock = threading.Lock()

    def started(self) -> None:
        with self.lock:
            self.busy += 1
            self.announced = False

    def finished(self) -> None:
        with self.lock:
            self.busy -= 1

    def idle(self) -> None:
        with self.lock:
            if self.busy or self.announced:
                return
            self.announced = True
        self.announce()


class _PoolRunner(Runner):
    """A runner thread of a process: tells the process when it starts and ends a job."""

    pool_idle: _Idle

    def drive(self, job: Job) -> Job:
        self.pool_idle.started()
        try:
            return super().drive(job)
        finally:
            self.pool_idle.finished()


class RunnerProcess:
    """Drives up to `concurrency` jobs at once; stops claiming once `stopping` is set."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        concurrency: int = 1,
        on_progress: ProgressCallback | None = None,
        on_idle: Callable[[], None] | None = None,
        faults: Faults = NO_FAULTS,
        listen: bool = True,
    ) -> None:
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            from cairn.errors import UsageError

            raise UsageError(f"--concurrency takes a number of jobs from 1 to {MAX_CONCURRENCY}")
        self.store = store
        self.config = config
        self.concurrency = concurrency
        self.runner_id = new_runner_id()
        self.stopping = threading.Event()
        self.listen = listen
        self._idle = _Idle(on_idle or (lambda: None))
        self._on_progress = on_progress
        self._faults = faults
        self._threads: list[threading.Thread] = []
        self._worker: threading.Thread | None = None

    def start(self) -> None:
        """Work in a background thread (`cairn serve --workers`) until `stop`."""
        self._worker = threading.Thread(target=self._work_quietly, daemon=True, name="runners")
        self._worker.start()

    def stop(self, timeout: float) -> None:
        """Stop claiming, hand back every job held, and wait up to `timeout` for the threads."""
        self._hand_back()
        if self._worker is not None:
            self._worker.join(timeout)

    def _work_quietly(self) -> None:
        try:
            self.work()
        except Exception:
            _log.exception("the runners stopped on an unexpected error")

    def work(self, *, until_idle: bool = False) -> list[Job]:
        """Drive jobs until stopped (Ctrl-C, SIGTERM) or, with `until_idle`, nothing is left."""
        self._register()
        beat = threading.Thread(target=self._heartbeat, daemon=True, name="runner-heartbeat")
        beat.start()
        wakeups: Wakeups | None = None
        try:
            wakeups = open_wakeups(self.store, listen=self.listen)
            return self._run_threads(wakeups, until_idle)
        except KeyboardInterrupt:
            self._hand_back()
            raise
        finally:
            self.stopping.set()
            if wakeups is not None:
                wakeups.close()
            beat.join(timeout=STOP_GRACE_SECONDS)
            with contextlib.suppress(Exception), self.store.begin() as conn:
                runner_ledger.unregister(conn, self.runner_id)

    def _runner(self, wakeups: Wakeups) -> _PoolRunner:
        runner = _PoolRunner(
            self.store,
            self.config,
            runner_id=self.runner_id,
            on_progress=self._on_progress,
            on_idle=self._idle.idle,
            faults=self._faults,
            wait_for_work=self._idle_wait(wakeups),
            stopping=self.stopping,
        )
        runner.pool_idle = self._idle
        return runner

    def _idle_wait(self, wakeups: Wakeups) -> Callable[[], bool]:
        """One thread's idle wait; while listening, also until the first lease runs out.

        A lease that runs out notifies nobody (and moves no SQLite data_version): without
        this, a dead runner's job would wait for the next poll on top of its lease.
        """
        waiter = wakeups.waiter()
        if not wakeups.listening:
            return waiter.wait

        def wait() -> bool:
            try:
                with self.store.read() as conn:
                    until = runner_ledger.seconds_until_a_lease_expires(conn)
            except Exception:
                until = None  # the plain poll still ends the wait
            return waiter.wait(None if until is None else until + LEASE_EXPIRY_MARGIN)

        return wait

    def _run_threads(self, wakeups: Wakeups, until_idle: bool) -> list[Job]:
        if self.concurrency == 1:
            # In the main thread, as before: Ctrl-C interrupts the drive and hands its job back.
            return self._runner(wakeups).work(until_idle=until_idle)
        driven: list[list[Job]] = [[] for _ in range(self.concurrency)]
        threads = [
            threading.Thread(
                target=self._thread_work,
                args=(self._runner(wakeups), until_idle, driven[n]),
                daemon=True,
                name=f"runner-{n}",
            )
            for n in range(self.concurrency)
        ]
        self._threads = threads
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=1.0)  # a timed join lets SIGINT / SIGTERM reach this thread
        return sorted((job for jobs in driven for job in jobs), key=lambda job: job.id)

    def _thread_work(self, runner: Runner, until_idle: bool, driven: list[Job]) -> None:
        try:
            driven.extend(runner.work(until_idle=until_idle))
        except Exception:
            # Drive already turns a job's errors into a block; this is the store going away.
            _log.exception("a runner thread stopped; the others go on")

    def _hand_back(self) -> None:
        """Give back every job this process holds, so others claim them now, not at expiry."""
        self.stopping.set()
        with contextlib.suppress(Exception), self.store.begin() as conn:
            runner_ledger.hand_back(conn, self.runner_id)
        for thread in self._threads:
            # Their next fenced write is refused now; wait a little for them to notice.
            thread.join(timeout=STOP_GRACE_SECONDS / self.concurrency)

    def _register(self) -> None:
        with self.store.begin() as conn:
            runner_ledger.register(
                conn,
                self.runner_id,
                host=socket.gethostname(),
                workspace_host=host_of(self.config),
                pid=os.getpid(),
                concurrency=self.concurrency,
                lease_seconds=self.config.lease_seconds,
            )

    def _heartbeat(self) -> None:
        """Beat every third of a lease; a row someone removed is entered again."""
        while not self.stopping.wait(self.config.lease_seconds / 3):
            try:
                with self.store.begin() as conn:
                    alive = runner_ledger.beat(conn, self.runner_id)
                if not alive:
                    self._register()
            except Exception:
                _log.warning("could not record this runner's heartbeat; retrying")
