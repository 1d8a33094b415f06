"""The code-job workflow on the stage engine: staleness, cascades, unreadable records, show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cairn.stages import Stage, Status
from cairn.store.schema import rooms, stage_runs
from cairn.workspace import commands

from .conftest import Cairn

SCRIPT = """
steps:
  - write: {path: notes.txt, content: "first draft\\n"}
  - finish: {summary: wrote notes}
"""


def _waiting_for_review(cairn: Cairn) -> int:
    job = cairn.submit(SCRIPT)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review
    return job.id


def _runs(cairn: Cairn, job_id: int, name: str) -> list[dict]:
    return [s for s in cairn.detail(job_id)["stages"] if s["name"] == name]


def test_show_reports_recipe_content_evidence_reuse_and_attempt(cairn: Cairn) -> None:
    job_id = _waiting_for_review(cairn)
    cairn.approve(job_id)
    cairn.work()
    stages = cairn.detail(job_id)["stages"]
    assert {"recipe_id", "content_id", "evidence", "reused", "attempt"} <= set(stages[0])
    reused = {s["name"] for s in stages if s["reused"]}
    assert reused == {
        "preparing_baseline",
        "preparing_workspace",
        "preparing_dependencies",
        "running_agent",
        "verifying",
        "summarizing",
    }
    agent = _runs(cairn, job_id, "running_agent")[-1]
    assert agent["evidence"]["files_changed"] == {
        "value": 1,
        "expect": "at_least",
        "target": 1,
        "unit": "",
    }


def test_an_equal_size_edit_of_a_workspace_file_makes_the_agent_stage_stale(cairn: Cairn) -> None:
    job_id = _waiting_for_review(cairn)
    before = cairn.detail(job_id)
    workspace = cairn.workspace(job_id)
    notes = workspace / "notes.txt"
    edited = notes.read_bytes().replace(b"first", b"FIRST")
    assert len(edited) == notes.stat().st_size
    notes.write_bytes(edited)
    cairn.approve(job_id)
    cairn.work()
    after = cairn.detail(job_id)
    assert [r["status"] for r in _runs(cairn, job_id, "running_agent")] == ["accepted", "accepted"]
    assert after["result_fingerprint"] != before["result_fingerprint"]
    # The approval was for the old result: the new one waits for its own review.
    assert (after["stage"], after["status"]) == ("awaiting_review", "waiting")
    assert after["effects"] == []


def test_a_changed_verify_command_reruns_verify_and_after_but_not_the_agent(cairn: Cairn) -> None:
    job_id = _waiting_for_review(cairn)
    with cairn.store.begin() as conn:
        conn.execute(sa.update(rooms).values(verify_command="test -s notes.txt"))
    cairn.approve(job_id)
    cairn.work()
    agent = _runs(cairn, job_id, "running_agent")
    verify = _runs(cairn, job_id, "verifying")
    summary = _runs(cairn, job_id, "summarizing")
    assert [r["status"] for r in agent] == ["accepted"] and agent[0]["reused"]
    assert [r["status"] for r in verify] == ["accepted", "accepted"]
    assert verify[0]["recipe_id"] != verify[1]["recipe_id"]
    assert verify[1]["evidence"]["exit_status"]["value"] == 0
    assert len(summary) == 2
    assert cairn.job(job_id).stage is Stage.awaiting_review


def test_a_corrupted_stage_run_is_run_again_not_blocked(cairn: Cairn) -> None:
    job_id = _waiting_for_review(cairn)
    with cairn.store.begin() as conn:
        conn.execute(
            sa.update(stage_runs)
            .where(stage_runs.c.job_id == job_id, stage_runs.c.stage == "preparing_workspace")
            .values(evidence={"worktree_valid": {"value": True, "expect": "no-such-check"}})
        )
    cairn.approve(job_id)
    cairn.work()
    workspace = _runs(cairn, job_id, "preparing_workspace")
    assert [r["status"] for r in workspace] == ["accepted", "accepted"]
    assert not workspace[1]["reused"]
    finished = cairn.job(job_id)
    assert (finished.stage, finished.status) == (Stage.completed, Status.completed)
    assert _runs(cairn, job_id, "running_agent")[0]["reused"], "the agent's result was kept"


def test_verify_evidence_counts_tests_run_against_collected(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `python` is this interpreter, as in the acceptance harness: a bare Debian has only python3.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with cairn.store.begin() as conn:
        conn.execute(sa.update(rooms).values(verify_command="python -m pytest -p no:cacheprovider"))
    job_id = _waiting_for_review(cairn)
    verify = _runs(cairn, job_id, "verifying")[-1]
    assert verify["evidence"]["tests_run"] == {
        "value": 1,
        "expect": "all_of",
        "target": 1,
        "unit": "collected",
    }


def test_an_undecidable_push_blocks_the_job_instead_of_repeating(cairn: Cairn) -> None:
    job_id = _waiting_for_review(cairn)
    # Someone else already has the job's branch name in the room's repository, elsewhere.
    cairn.git("branch", cairn.branch(job_id), "main")
    cairn.approve(job_id)
    cairn.work()
    blocked = cairn.detail(job_id)
    assert blocked["status"] == "blocked"
    assert "neither adopts nor overwrites" in blocked["diagnosis"]
    assert [(e["kind"], e["status"]) for e in blocked["effects"]] == [("push", "intended")]
    assert cairn.git("rev-parse", cairn.branch(job_id)) == cairn.git("rev-parse", "main")


def test_the_agent_stage_records_whether_isolation_held(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "steps:\n  - write: {path: a.txt, content: a}\n  - run: 'true'\n  - finish: {}\n"
    sandboxed = cairn.submit(script)
    cairn.work()
    held = _runs(cairn, sandboxed.id, "running_agent")[-1]["evidence"]["isolation"]["value"]
    assert held == "held"

    monkeypatch.setattr(commands, "_bwrap_path", lambda: None)  # as on a host without bwrap
    refused = cairn.submit(script)
    cairn.work()
    stopped = cairn.detail(refused.id)
    assert stopped["status"] == "blocked", "no sandbox, no command"
    assert "bubblewrap" in stopped["diagnosis"], "the user is told how to get a sandbox"
    with cairn.store.begin() as conn:
        conn.execute(sa.update(rooms).values(scope={"unsandboxed_commands": True}))
    allowed = cairn.submit(script)
    cairn.work()
    unproven = _runs(cairn, allowed.id, "running_agent")[-1]["evidence"]["isolation"]["value"]
    assert unproven == "unproven"


@pytest.mark.parametrize(
    ("refused", "left_in"),
    [
        (Stage.preparing_workspace, Stage.preparing_baseline),
        # Past the run gate, the job leaves it in the write of its first stage's intent.
        (Stage.preparing_baseline, Stage.awaiting_run_approval),
    ],
)
def test_a_stage_is_entered_with_its_intent_in_one_write_or_not_at_all(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch, refused: Stage, left_in: Stage
) -> None:
    # The job's move into a stage and the stage's recorded intent are one fenced write: a
    # failure writing the intent leaves no sign of the stage (no progress event, no run).
    from cairn.jobs import gates
    from cairn.store import fenced_runs, progress

    def refusing(
        conn: sa.Connection, job_id: int, token: int, stage: str, recipe: str, **options: Any
    ) -> object:
        if stage == refused.value:
            raise RuntimeError("the intent could not be written")
        return real(conn, job_id, token, stage, recipe, **options)

    real = fenced_runs.start_in
    monkeypatch.setattr(fenced_runs, "start_in", refusing)
    job = cairn.submit(SCRIPT)
    cairn.work()
    stopped = cairn.job(job.id)
    assert (stopped.stage, stopped.status) == (left_in, Status.blocked)
    with cairn.store.read() as conn:
        entered = {event.stage for event in progress.events_for_job(conn, job.id)}
    assert left_in in entered and refused not in entered
    assert _runs(cairn, job.id, refused.value) == []
    monkeypatch.setattr(fenced_runs, "start_in", real)
    with cairn.store.begin() as conn:
        gates.resume(conn, job.id, "alice")
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review
    with cairn.store.read() as conn:
        moves = [event.stage for event in progress.events_for_job(conn, job.id)]
    assert moves.count(refused) == 1
    (entered_once,) = _runs(cairn, job.id, refused.value)
    assert entered_once["status"] == "accepted"


# The writes are read off SQLite's transactions (on PostgreSQL some are single statements
# that commit on their own); the code that groups them is the same on both.
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_new_jobs_first_write_enters_its_first_stage_and_makes_this_host_its_holder(
    cairn: Cairn,
) -> None:
    # One write takes a new job past the run gate: the move into its first stage (and its
    # progress event), that stage's intent, and this host as the holder of its workspace;
    # nothing written between its claim and that write.
    job = cairn.submit(SCRIPT)
    written: list[set[str]] = []
    tables: set[str] = set()

    def on_execute(*args: Any) -> None:
        tables.update(re.findall(r"(?:INSERT INTO|UPDATE|DELETE FROM) (\w+)", args[2]))

    def on_commit(_conn: sa.Connection) -> None:
        if tables:
            written.append(set(tables))
        tables.clear()

    sa.event.listen(cairn.store.engine, "before_cursor_execute", on_execute)
    sa.event.listen(cairn.store.engine, "commit", on_commit)
    try:
        cairn.work()
    finally:
        sa.event.remove(cairn.store.engine, "before_cursor_execute", on_execute)
        sa.event.remove(cairn.store.engine, "commit", on_commit)
    assert cairn.job(job.id).stage is Stage.awaiting_review
    claim = next(n for n, t in enumerate(written) if "runners" not in t and "jobs" in t)
    assert written[claim] == {"jobs"}, "the claim"
    assert written[claim + 1] == {"jobs", "events", "stage_runs", "workspace_holders"}
    assert not any("workspace_holders" in t for t in written[claim + 2 :])


def test_checkpoints_leave_no_ref_behind_and_each_bundle_holds_its_commit(
    cairn: Cairn, tmp_path: Path
) -> None:
    # Every ref in a mirror is looked at by each fetch and worktree command: a ref per
    # checkpoint would make every job slower than the one before it.
    from cairn.store import checkpoints

    job = cairn.submit(SCRIPT)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review
    mirror = cairn.config.mirror_path(cairn.store.installation_id, job.room_id)
    refs = subprocess.run(
        ["git", "for-each-ref", "refs/cairn/"], cwd=mirror, capture_output=True, text=True
    )
    assert refs.returncode == 0 and refs.stdout == ""
    with cairn.store.read() as conn:
        saved = checkpoints.for_job(conn, job.id)
    assert [c.stage for c in saved] == ["running_agent", "summarizing"]
    for checkpoint in saved:
        bundle = tmp_path / f"{checkpoint.stage}.bundle"
        bundle.write_bytes(checkpoint.bundle)
        heads = subprocess.run(
            ["git", "bundle", "list-heads", str(bundle)],
            cwd=mirror,
            capture_output=True,
            text=True,
            check=True,
        )
        assert heads.stdout.split()[0] == checkpoint.commit


def test_the_commit_checkpointed_as_the_agents_result_is_the_one_summarizing_delivers(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written once, with the job's message, and bundled once: the agent's checkpoint and the
    # summary's hold the very same commit, so the summary makes no second one.
    from cairn.store import checkpoints
    from cairn.workspace import worktree

    written: list[str] = []
    packed: list[str] = []
    real_run_git, real_bundle = worktree.run_git, worktree.bundle

    def run_git(*args: str, **kwargs: Any) -> str:
        made = real_run_git(*args, **kwargs)
        if "commit-tree" in args:
            written.append(made)
        return made

    def bundle(mirror: Any, tip: str, *args: Any, **kwargs: Any) -> bytes:
        packed.append(tip)
        return real_bundle(mirror, tip, *args, **kwargs)

    monkeypatch.setattr(worktree, "run_git", run_git)
    monkeypatch.setattr(worktree, "bundle", bundle)
    job = cairn.submit(SCRIPT, text="Write the notes\nand say why")
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review
    with cairn.store.read() as conn:
        agent, summary = checkpoints.for_job(conn, job.id)
    branch = cairn.branch(job.id)
    mirror = cairn.config.mirror_path(cairn.store.installation_id, job.room_id)
    head = subprocess.run(
        ["git", "log", "-1", "--format=%H%n%B", f"refs/heads/{branch}"],
        cwd=mirror, capture_output=True, text=True, check=True,
    ).stdout.split("\n", 1)  # fmt: skip
    assert agent.head == cairn.job(job.id).baseline != agent.commit
    assert written == packed == [agent.commit] == [summary.commit] == [summary.head] == head[:1]
    assert head[1].strip() == f"{branch}: Write the notes"
    assert summary.bundle == agent.bundle
