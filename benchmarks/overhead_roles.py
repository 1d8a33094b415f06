"""What each child process of engine_overhead.py does: the cairn side and the DBOS side.

Each role is one process doing one thing to one database, and returns its figures; the
parent runs `python benchmarks/overhead_roles.py ROLE URL STAGES KILL_AT SPAWNED_AT` and reads
the last line that starts with RESULT. Only the work is timed: imports and start-up are
measured separately, and the store or system-database setup of a from-scratch run is not
timed at all. A KILL_AT above 0 makes the run die by SIGKILL right after stage KILL_AT is
checkpointed (for cairn: accepted; for DBOS: its step output recorded).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from typing import Any

WORKFLOW_ID = "engine-overhead"
LEASE_SECONDS = 60
RESULT_PREFIX = "RESULT "
RECOVERY_TIMEOUT_S = 240


def stage_name(number: int) -> str:
    return f"stage-{number:04d}"


def sigkill_self(_code: int = 137) -> None:
    """Die the way a killed runner dies: no cleanup, no flush, no atexit."""
    os.kill(os.getpid(), signal.SIGKILL)


# --- cairn, in a child process -------------------------------------------------------------


def noop_workflow(stages: int, *, effect_free: bool = True) -> Any:
    """N stages that do nothing but return a trivial content id and evidence that holds.

    They touch nothing outside the process, so they are declared effect-free (one write per
    stage, as DBOS writes one per step); `effect_free=False` times the path of a stage that
    acts outside, whose recipe is written, durably, before it runs (two writes per stage).
    """
    from cairn.engine import Evidence, Expect, Measurement, Result, StageDef, Workflow

    evidence = Evidence.of(Measurement("noop", 1, Expect.equals, 1))

    def stage(number: int) -> StageDef[None]:
        content = f"noop-{number:04d}"
        return StageDef(
            name=stage_name(number),
            run=lambda ctx, upstream: Result(content, evidence),
            required=("noop",),
            # The no-op's content "as it is now" never changes, so an accepted run is reusable.
            content_now=lambda ctx, prior: content,
            effect_free=effect_free,
        )

    return Workflow("noop", tuple(stage(n) for n in range(1, stages + 1)))


def cairn_job(store: Any) -> None:
    """The minimum a job row needs: a requester, a group, a room; then the job itself."""
    from cairn.store import identity, rooms
    from cairn.store import jobs as job_ledger

    with store.begin() as conn:
        user = identity.add_user(conn, "bench")
        group = identity.add_group(conn, "bench")
        identity.set_membership(conn, group.id, user.id, "member")
        room = rooms.create_room(
            conn, name="bench", group_id=group.id, repo="/nowhere", base_branch="main"
        )
        job_ledger.submit(
            conn, room_id=room.id, requester_id=user.id, text="no-op", agent={}, scope={}
        )


def cairn_claim(store: Any, *, lease_ran_out: bool) -> tuple[int, int]:
    """Claim the store's one job: its id and fencing token. `lease_ran_out` claims as if the
    dead runner's lease had expired (claim() takes a running job only then), without waiting."""
    from datetime import timedelta

    from cairn.store import leases

    with store.begin() as conn:
        now = leases.database_now(conn)
        if lease_ran_out:
            now += timedelta(seconds=LEASE_SECONDS + 1)
        job = leases.claim(conn, "bench-runner", LEASE_SECONDS, now=now)
    assert job is not None, "the benchmark job could not be claimed"
    return job.id, job.fencing_token


def role_cairn_run(
    url: str, stages: int, kill_at: int, entered: float, *, effect_free: bool = True
) -> dict[str, Any]:
    """Drive N stages from scratch; with kill_at, die by SIGKILL once that stage is accepted."""
    from cairn.engine import Engine, Faults
    from cairn.jobs.ledger import StoreLedger
    from cairn.store import Store

    imported = time.perf_counter()
    store = Store.open(url, create=True)
    cairn_job(store)
    ledger = StoreLedger(store, *cairn_claim(store, lease_ran_out=False))
    faults = Faults()
    if kill_at:
        rule = Faults.parse(f"crash:after_accept:{stage_name(kill_at)}")
        faults = dataclasses.replace(rule, die=sigkill_self)
    workflow = noop_workflow(stages, effect_free=effect_free)
    started = time.perf_counter()
    report = Engine.starting(ledger, faults=faults).drive(workflow, None)
    work_s = time.perf_counter() - started
    store.close()
    return {"import_s": imported - entered, "work_s": work_s, "ran": len(report.ran), "reused": 0}


def role_cairn_resume(url: str, stages: int, kill_at: int, entered: float) -> dict[str, Any]:
    """A new runner: open the store, claim the job, take one snapshot, drive to the end."""
    from cairn.engine import Engine
    from cairn.jobs.ledger import StoreLedger
    from cairn.store import Store

    imported = time.perf_counter()
    workflow = noop_workflow(stages)
    started = time.perf_counter()
    store = Store.open(url)
    ledger = StoreLedger(store, *cairn_claim(store, lease_ran_out=True))
    opened = time.perf_counter()
    first_run: list[float] = []  # when the first stage that is not reused starts

    def on_start(stage: Any) -> None:
        if not first_run:
            first_run.append(time.perf_counter())

    report = Engine.starting(ledger, on_start=on_start).drive(workflow, None)
    finished = time.perf_counter()
    store.close()
    return {
        "import_s": imported - entered,
        "open_s": opened - started,
        "body_s": finished - opened,
        "reuse_s": (first_run[0] if first_run else finished) - opened,
        "work_s": finished - started,
        "ran": len(report.ran),
        "reused": len(report.reused),
    }


# --- DBOS, in a child process --------------------------------------------------------------


def dbos_launch(url: str, kill_at: int) -> tuple[Any, dict[str, Any]]:
    """Configure and launch DBOS; returns the workflow and the marks it sets as it runs."""
    from dbos import DBOS

    marks: dict[str, Any] = {"executed": 0, "done": threading.Event()}
    DBOS(
        config={
            "name": "engine-overhead",
            "system_database_url": url,
            "application_version": "engine-overhead",  # the same in the killed and new process
            "log_level": "WARNING",
        }
    )

    @DBOS.step()
    def noop_step(number: int) -> int:
        marks["executed"] += 1
        return number

    @DBOS.workflow()
    def noop_steps(stages: int) -> int:
        marks["entered"] = time.perf_counter()
        for number in range(1, stages + 1):
            noop_step(number)
            if number == kill_at:  # step K's output is checkpointed: cairn's after_accept
                sigkill_self()
        marks["exited"] = time.perf_counter()
        marks["done"].set()
        return stages

    DBOS.launch()
    return noop_steps, marks


def role_dbos_run(url: str, stages: int, kill_at: int, entered: float) -> dict[str, Any]:
    """Call the workflow of N steps from scratch; with kill_at, die once that step is recorded."""
    from dbos import DBOS, SetWorkflowID

    imported = time.perf_counter()
    noop_steps, marks = dbos_launch(url, kill_at)
    started = time.perf_counter()
    with SetWorkflowID(WORKFLOW_ID):
        noop_steps(stages)
    work_s = time.perf_counter() - started
    DBOS.destroy()
    return {"import_s": imported - entered, "work_s": work_s, "ran": marks["executed"], "reused": 0}


def role_dbos_resume(url: str, stages: int, kill_at: int, entered: float) -> dict[str, Any]:
    """A new process: launch() finds the pending workflow and recovers it from its steps."""
    from dbos import DBOS

    imported = started = time.perf_counter()
    _noop_steps, marks = dbos_launch(url, kill_at=0)
    opened = time.perf_counter()
    if not marks["done"].wait(RECOVERY_TIMEOUT_S):
        raise SystemExit("DBOS did not recover the workflow in time")
    result = DBOS.retrieve_workflow(WORKFLOW_ID).get_result(polling_interval_sec=0.005)
    settled = time.perf_counter()
    DBOS.destroy()
    assert result == stages, f"the recovered workflow returned {result!r}"
    body_s = marks["exited"] - marks["entered"]
    return {
        "import_s": imported - entered,
        "open_s": opened - started,
        "dispatch_s": marks["entered"] - opened,
        "body_s": body_s,
        "work_s": (opened - started) + body_s,
        "wall_s": settled - started,
        "ran": marks["executed"],
        "reused": stages - marks["executed"],
    }


def role_cairn_intent_run(url: str, stages: int, kill_at: int, entered: float) -> dict[str, Any]:
    """As cairn-run, with stages not declared effect-free: intent first, then acceptance."""
    return role_cairn_run(url, stages, kill_at, entered, effect_free=False)


ROLES = {
    "cairn-run": role_cairn_run,
    "cairn-intent-run": role_cairn_intent_run,
    "cairn-resume": role_cairn_resume,
    "dbos-run": role_dbos_run,
    "dbos-resume": role_dbos_resume,
}


def main(argv: list[str]) -> None:
    entered = time.perf_counter()
    role, url, stages, kill_at, spawned_at = argv
    startup_s = time.time() - float(spawned_at)
    figures = ROLES[role](url, int(stages), int(kill_at), entered)
    print(RESULT_PREFIX + json.dumps(figures | {"startup_s": startup_s}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
