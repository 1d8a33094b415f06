"""What saving a job's conversation costs as it grows: append-only steps against one blob.

For each backend (SQLite, and PostgreSQL when it answers at 127.0.0.1:5432) one job is
claimed in a fresh store, then its conversation is saved the way a runner saves it, one
fenced transaction per step (commit and its fsync included):

- `append`: `store.context_steps.append`, one row per step (issue 13's ledger);
- `blob`:   `store.contexts.save` of the whole message list, rewritten at every step (the
            shape the context had before issue 13).

A save at step k is timed over a window of steps ending at k; the table shows the median of
the windows of several conversations (a new job each) at steps 10, 100 and 1,000, and the
ratio of step 1,000 to step 10 for each way.

    .venv/bin/python benchmarks/agent_context.py [--steps 10,100,1000] [--window 9] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cairn.store import Store, context_steps, contexts, identity, leases, rooms
from cairn.store import jobs as job_ledger
from cairn.store.records import Job, StepKind
from cairn.testing import stores

# One step as a tool-calling loop saves it: a bounded tool result (about 1 kB of text).
TOOL_RESULT = {"call_id": "call_0", "name": "read_file", "content": "x = 1\n" * 170}

Save = Callable[[Store, Job, int], None]


def message(seq: int) -> dict[str, Any]:
    """The payload of step `seq` (each one distinct, so nothing compresses them away)."""
    return {**TOOL_RESULT, "call_id": f"call_{seq}"}


def append_step(store: Store, job: Job, seq: int) -> None:
    """Save step `seq` as one new row."""
    with store.fenced(job.id, job.fencing_token) as conn:
        context_steps.append(
            conn, job.id, job.fencing_token, seq, StepKind.tool_result, message(seq)
        )


def save_blob(store: Store, job: Job, seq: int) -> None:
    """Save step `seq` by rewriting the job's whole conversation, steps 1 to `seq`."""
    state = {"messages": [message(n) for n in range(1, seq + 1)]}
    with store.fenced(job.id, job.fencing_token) as conn:
        contexts.save(conn, job.id, "openai", state)


def measure(
    store: Store, save: Save, targets: list[int], window: int, *, every_step: bool
) -> dict[int, list[float]]:
    """Seconds of each save in the `window` steps ending at each target step, for a new job.

    `every_step`: save every step from 1 (appends, whose cost could grow with the rows before
    them); otherwise only the timed ones (a blob rewrite depends on the step alone).
    """
    job = claimed_job(store)
    windows = {k: range(max(1, k - window + 1), k + 1) for k in targets}
    wanted = {n for steps in windows.values() for n in steps}
    timed: dict[int, float] = {}
    for seq in range(1, max(targets) + 1):
        if not every_step and seq not in wanted:
            continue
        started = time.perf_counter()
        save(store, job, seq)
        timed[seq] = time.perf_counter() - started
    return {k: [timed[n] for n in steps] for k, steps in windows.items()}


def medians(
    store: Store, save: Save, targets: list[int], options: argparse.Namespace, *, every_step: bool
) -> dict[int, float]:
    """The median save at each target step, over every round's window (a new job per round)."""
    samples: dict[int, list[float]] = {k: [] for k in targets}
    for _ in range(options.rounds):
        for k, took in measure(store, save, targets, options.window, every_step=every_step).items():
            samples[k].extend(took)
    return {k: statistics.median(took) for k, took in samples.items()}


def claimed_job(store: Store) -> Job:
    """A new job in its own room, claimed by this process."""
    with store.begin() as conn:
        name = f"bench-{uuid.uuid4().hex[:8]}"
        user = identity.add_user(conn, name)
        group = identity.add_group(conn, name)
        room = rooms.create_room(conn, name=name, group_id=group.id, repo="/r", base_branch="main")
        job = job_ledger.submit(
            conn, room_id=room.id, requester_id=user.id, text="bench", agent={}, scope={}
        )
        taken = leases.claim(conn, "bench-runner", 3600, job_id=job.id)
    assert taken is not None, "a fresh job is claimable"
    return taken


@contextmanager
def fresh_store(backend: str, folder: Path) -> Iterator[Store | None]:
    """A migrated store of `backend`, removed afterwards; None when PostgreSQL is unreachable."""
    if backend == "sqlite":
        store = Store.open(f"sqlite:///{folder}/{backend}-{time.monotonic_ns()}.db", create=True)
        try:
            yield store
        finally:
            store.close()
        return
    admin, unreachable = stores.admin_engine()
    if unreachable:
        print(f"postgres: skipped ({unreachable.splitlines()[0]})")
        yield None
        return
    name = stores.unique_database_name("cairn_bench_context")
    stores.create_database(admin, name)
    store = Store.open(stores.postgres_database_url(name), create=True)
    try:
        yield store
    finally:
        store.close()
        stores.drop_database(admin, name)
        admin.dispose()


def report(backend: str, results: dict[str, dict[int, float]], targets: list[int]) -> None:
    """One line per way of saving: median ms at each target step, then last / first."""
    header = "".join(f"{f'step {k:,}':>13}" for k in targets)
    print(f"{backend:<10}{header}{f'{targets[-1]:,} vs {targets[0]:,}':>16}")
    for way, medians in results.items():
        cells = "".join(f"{medians[k] * 1000:>11.2f}ms" for k in targets)
        ratio = medians[targets[-1]] / medians[targets[0]]
        print(f"  {way:<8}{cells}{ratio:>15.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100,1000", help="steps to report, ascending")
    parser.add_argument("--window", type=int, default=9, help="saves per median")
    parser.add_argument("--rounds", type=int, default=3, help="conversations per way")
    parser.add_argument("--backends", default="sqlite,postgres")
    options = parser.parse_args()
    targets = sorted(int(k) for k in options.steps.split(","))
    ways: dict[str, tuple[Save, bool]] = {"append": (append_step, True), "blob": (save_blob, False)}
    print(
        "median time of one save (a fenced transaction and its commit), "
        f"{options.rounds} conversations x {options.window} saves per cell"
    )
    with tempfile.TemporaryDirectory(prefix="cairn-agent-context-") as tmp:
        for backend in options.backends.split(","):
            with fresh_store(backend, Path(tmp)) as store:
                if store is not None:
                    results = {
                        way: medians(store, save, targets, options, every_step=every)
                        for way, (save, every) in ways.items()
                    }
                    report(backend, results, targets)
    print(f"a step is one tool result of {len(str(TOOL_RESULT['content']))} characters")


if __name__ == "__main__":
    main()
