"""gc on both store backends: an ended job's workspace goes, then (on request) its branch."""

from __future__ import annotations

import os
import time

from cairn.jobs.gc import collect
from cairn.stages import Status
from cairn.store import checkpoints as checkpoint_ledger

from .conftest import Cairn

WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'


def test_gc_removes_an_ended_jobs_workspace_then_its_merged_branch(cairn: Cairn) -> None:
    done = cairn.submit(WRITE_B)
    cairn.work()
    cairn.approve(done.id)
    waiting = cairn.submit(WRITE_B.replace("b.txt", "c.txt"), "another change")
    cairn.work()
    assert cairn.job(done.id).status is Status.completed
    assert cairn.job(waiting.id).status is Status.waiting

    with cairn.store.begin() as conn:
        assert checkpoint_ledger.for_job(conn, done.id), "the delivered job was checkpointed"
        kept = checkpoint_ledger.for_job(conn, waiting.id)
    assert kept, "the waiting job was checkpointed"

    first = collect(cairn.store, cairn.config)

    assert first.workspaces == [done.id]
    assert first.checkpoints == [done.id]
    with cairn.store.begin() as conn:
        assert checkpoint_ledger.for_job(conn, done.id) == []
        assert checkpoint_ledger.for_job(conn, waiting.id) == kept, "a job that may run keeps them"
    assert not cairn.workspace(done.id).exists() and cairn.workspace(waiting.id).is_dir()
    assert cairn.git("branch", "--list", cairn.branch(done.id)) != "", "the repository is untouched"

    second = collect(cairn.store, cairn.config, branches=True)

    assert second.workspaces == [] and second.checkpoints == []
    assert second.branches == [{"job": done.id, "room": "sample", "branch": cairn.branch(done.id)}]
    assert cairn.git("branch", "--list", cairn.branch(done.id)) == ""
    effects = [(e["kind"], e["status"]) for e in cairn.detail(done.id)["effects"]]
    assert effects[-1] == ("delete_branch", "done")
    assert collect(cairn.store, cairn.config, branches=True).branches == []


def test_gc_repacks_a_mirror_whose_files_a_killed_gc_left_locked(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B)
    cairn.work()
    cairn.approve(job.id)
    cairn.work()
    [mirror] = cairn.config.mirrors_dir.glob("*/*.git")
    left = [mirror / "packed-refs.lock", mirror / "objects" / "info" / "commit-graph.lock"]
    a_minute_ago = time.time() - 60
    for lock in left:
        lock.write_text("left by a killed git\n")
        os.utime(lock, (a_minute_ago, a_minute_ago))
    assert collect(cairn.store, cairn.config).mirrors == ["sample"]
    assert not any(lock.exists() for lock in left)
    packed = (mirror / "packed-refs").read_text()
    assert f"refs/heads/{cairn.branch(job.id)}\n" in packed, "gc packed the job's branch"
