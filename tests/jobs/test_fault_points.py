"""Named crash points through the real runner process: each ends in the same delivered job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from cairn.stages import Status
from cairn.store.schema import checkpoints, stage_runs
from cairn.testing.harness import Cairn

CAIRN = Path(sys.executable).parent / "cairn"
SCRIPT = """
steps:
  - write: {path: out.txt, content: "one\\n"}
  - append: {path: out.txt, content: "two\\n"}
  - finish: {summary: wrote out.txt}
"""


def _work(cairn: Cairn, faults: str = "") -> int:
    env = os.environ | {
        "CAIRN_HOME": str(cairn.config.home),
        "CAIRN_LEASE_SECONDS": "0.5",
        "CAIRN_FAULTS": faults,
    }
    env["CAIRN_DATABASE_URL"] = cairn.store.engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [str(CAIRN), "work", "--until-idle"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (0, 137), done.stderr
    return done.returncode


@pytest.mark.parametrize(
    "point",
    [
        "crash:after_accept:running_agent",
        "crash:before_accept:verifying",
        "crash:after_start:summarizing",
        "crash:after_intent:push",
        "crash:after_effect:push",
        "crash:after_intent:merge",
        "crash:after_effect:merge",
        "crash:after_accept:delivering",  # accepted, the job not yet moved to completed
    ],
)
def test_a_crash_at_a_named_point_still_delivers_once(cairn: Cairn, point: str) -> None:
    job = cairn.submit(SCRIPT)
    before = cairn.git("rev-list", "--count", "main")
    crashed = _work(cairn, point)
    if cairn.job(job.id).status is Status.waiting:
        cairn.approve(job.id)
        crashed += _work(cairn, point)
    assert crashed == 137, f"{point} never fired"
    while not cairn.job(job.id).status.is_terminal:
        if cairn.job(job.id).status is Status.waiting:
            cairn.approve(job.id)
        assert _work(cairn) == 0
    done = cairn.detail(job.id)
    assert done["status"] == "completed"
    assert [(e["kind"], e["status"]) for e in done["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    assert cairn.git("show", "main:out.txt") == "one\ntwo"
    assert int(cairn.git("rev-list", "--count", "main")) == int(before) + 1


@pytest.mark.parametrize(
    ("stage", "column"), [("preparing_baseline", "baseline"), ("summarizing", "summary")]
)
def test_a_stage_killed_before_its_outcome_leaves_the_job_without_what_it_found(
    cairn: Cairn, stage: str, column: str
) -> None:
    """The baseline and the summary a stage sets on the job are written with its accepted
    run: a job never names a baseline, or shows a summary, that no accepted stage produced."""
    job = cairn.submit(SCRIPT)
    assert _work(cairn, f"crash:before_accept:{stage}") == 137
    assert getattr(cairn.job(job.id), column) is None, f"{column} written before {stage} ended"
    assert _work(cairn) == 0
    resumed = cairn.job(job.id)
    assert resumed.status is Status.waiting, cairn.detail(job.id)["diagnosis"]
    with cairn.store.read() as conn:
        accepted = conn.execute(
            sa.select(stage_runs.c.content_id).where(
                stage_runs.c.job_id == job.id,
                stage_runs.c.stage == "preparing_baseline",
                stage_runs.c.status == "accepted",
            )
        ).scalar_one()
    assert resumed.baseline == accepted
    assert resumed.summary is not None and "out.txt" in resumed.summary


def test_a_git_killed_with_its_runner_leaves_no_lock_that_blocks_the_job(cairn: Cairn) -> None:
    """SIGKILL takes git down with the runner, before git removes its lock files: the next
    runner clears the ones on the job's worktree (its index, HEAD, its branch) and goes on."""
    job = cairn.submit(SCRIPT)
    assert _work(cairn, "crash:after_accept:preparing_workspace") == 137
    workspace = cairn.workspace(job.id)
    names = ("index.lock", "HEAD.lock", f"refs/heads/{cairn.branch(job.id)}.lock")
    where = [
        "git",
        "rev-parse",
        "--path-format=absolute",
        *(a for n in names for a in ("--git-path", n)),
    ]
    found = subprocess.run(where, cwd=workspace, capture_output=True, text=True, check=True)
    locks = [Path(line) for line in found.stdout.splitlines()]
    assert len(locks) == 3 and all(lock.parent.is_dir() for lock in locks)
    an_hour_ago = time.time() - 3600  # far older than a lease: no live git holds it
    for lock in locks:
        lock.write_text("left by a killed git\n")
        os.utime(lock, (an_hour_ago, an_hour_ago))
    assert _work(cairn) == 0
    assert cairn.job(job.id).status is Status.waiting, cairn.detail(job.id)["diagnosis"]
    cairn.approve(job.id)
    assert _work(cairn) == 0
    assert cairn.job(job.id).status is Status.completed, cairn.detail(job.id)["diagnosis"]
    assert [lock for lock in locks if lock.exists()] == []
    assert cairn.git("show", "main:out.txt") == "one\ntwo"


def test_a_workspace_add_killed_with_its_runner_is_made_again(cairn: Cairn) -> None:
    """A runner SIGKILLed inside `git worktree add -b` leaves the new branch's lock and a
    worktree entry locked "initializing" that names a folder without its `.git`: git then
    refuses every later add at that path. A rebuild from a checkpoint, killed, leaves a lock on
    the checkpoint's ref. The next runner clears them all, makes the workspace and checkpoints
    the agent's result."""
    job = cairn.submit(SCRIPT)
    assert _work(cairn, "crash:after_start:preparing_workspace") == 137
    [mirror] = cairn.config.mirrors_dir.glob("*/*.git")
    workspace = cairn.workspace(job.id)
    staging = workspace.with_name(workspace.name + ".partial")
    entry = mirror / "worktrees" / staging.name
    locks = [
        mirror / "refs" / "heads" / f"{cairn.branch(job.id)}.lock",
        mirror / "refs" / "cairn" / "checkpoints" / f"job-{job.id}.lock",
    ]
    for folder in (entry, staging, *(lock.parent for lock in locks)):
        folder.mkdir(parents=True, exist_ok=True)
    (entry / "locked").write_text("initializing\n")
    (entry / "gitdir").write_text(f"{staging}/.git\n")
    an_hour_ago = time.time() - 3600
    for lock in locks:
        lock.write_text("left by a killed git\n")
        os.utime(lock, (an_hour_ago, an_hour_ago))
    assert _work(cairn) == 0
    assert cairn.job(job.id).status is Status.waiting, cairn.detail(job.id)["diagnosis"]
    with cairn.store.begin() as conn:
        checkpointed = conn.execute(
            sa.select(checkpoints.c.stage, checkpoints.c.head, checkpoints.c.commit).where(
                checkpoints.c.job_id == job.id
            )
        ).all()
    # The agent's result, not yet committed, is bundled from a commit of its own; the
    # summary's from the job's branch.
    assert [(stage, head != commit) for stage, head, commit in checkpointed] == [
        ("running_agent", True),
        ("summarizing", False),
    ]
    cairn.approve(job.id)
    assert _work(cairn) == 0
    assert cairn.job(job.id).status is Status.completed, cairn.detail(job.id)["diagnosis"]
    assert not any(lock.exists() for lock in locks) and not staging.exists()
    assert cairn.git("show", "main:out.txt") == "one\ntwo"


def test_the_measurement_index_of_a_killed_runner_is_dropped_by_the_next(cairn: Cairn) -> None:
    """A measurement index (an index of the whole repository) goes with the object that
    wrote it; a SIGKILLed runner's stays behind until the next runner of the job drops it."""
    job = cairn.submit(SCRIPT)
    assert _work(cairn, "crash:after_accept:running_agent") == 137
    found = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", "--git-path", "index"],
        cwd=cairn.workspace(job.id),
        capture_output=True,
        text=True,
        check=True,
    )
    admin = Path(found.stdout.strip()).parent
    assert list(admin.glob("cairn-index-*")), "the killed runner measured the agent's result"
    assert _work(cairn) == 0  # right as the lease runs out: the index is a moment old
    assert cairn.job(job.id).status is Status.waiting, cairn.detail(job.id)["diagnosis"]
    assert list(admin.glob("cairn-index-*")) == []
