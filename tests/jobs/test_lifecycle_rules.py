"""Every rule of DESIGN.md's job lifecycle, one test (or a few) named after it."""

from __future__ import annotations

import dataclasses
import subprocess
import threading
import time

import pytest

from cairn.errors import NotAllowed, UsageError
from cairn.jobs.view import outcome_id
from cairn.next_action import Action, NextAction
from cairn.stages import Stage, Status
from cairn.testing.harness import Cairn, Turns
from cairn.testing.repos import commit_file, kill_fast_forward_midway
from cairn.workspace.mirror import Mirror

DEPENDENCY_THEN_WRITE = """
steps:
  - write: {path: a.txt, content: "from job A\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - write: {path: a2.txt, content: "after approval\\n"}
  - finish: {summary: "job A done"}
"""
WRITE_B = """
steps:
  - write: {path: b.txt, content: "from job B\\n"}
  - finish: {summary: "job B done"}
"""


def test_rule_1_job_specific_continuity(cairn: Cairn, turns: Turns) -> None:
    """A paused job resumes in its own context even after another job ran in the same room."""
    a = cairn.submit(DEPENDENCY_THEN_WRITE, "job A")
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_dependency_approval

    b = cairn.submit(WRITE_B, "job B")
    cairn.work()
    cairn.approve(b.id)
    cairn.work()
    assert cairn.job(b.id).status is Status.completed

    cairn.approve(a.id)
    cairn.work()
    done = cairn.job(a.id)
    assert done.stage is Stage.awaiting_review
    files = cairn.git("ls-tree", "-r", "--name-only", "refs/heads/main")
    assert "b.txt" in files
    a_tree = _branch_files(cairn, cairn.detail(a.id))
    assert {"a.txt", "a2.txt"} <= a_tree and "b.txt" not in a_tree
    assert "job A done" in cairn.detail(a.id)["review"]["summary"], "the script ran to its end"
    assert any("termcolor==2.4.0 was approved" in n for n in turns.notes(a.id))
    assert not turns.notes(b.id)


def test_rule_2_provisional_is_not_final(cairn: Cairn) -> None:
    """Until the job ends, its feed shows the request and the stage, never the result."""
    job = cairn.submit(WRITE_B, "Add b.txt")
    cairn.work()
    waiting = cairn.detail(job.id)
    assert waiting["stage"] == "awaiting_review"
    assert waiting["feed"] == "Add b.txt\n\n[awaiting_review]"
    assert "job B done" in waiting["review"]["summary"]

    cairn.approve(job.id)
    cairn.work()
    final = cairn.detail(job.id)
    assert final["status"] == "completed"
    assert "job B done" in final["feed"] and "Delivered." in final["feed"]


def test_rule_2_output_before_an_approval_is_not_published(cairn: Cairn) -> None:
    """A job paused at the dependency gate shows no summary or result anywhere."""
    job = cairn.submit(DEPENDENCY_THEN_WRITE, "job A")
    cairn.work()
    paused = cairn.detail(job.id)
    assert paused["review"] is None and paused["result_fingerprint"] is None
    assert paused["feed"] == "job A\n\n[awaiting_dependency_approval]"


def test_rule_3_requester_cannot_approve_own_run(cairn: Cairn) -> None:
    """Run gate: an admin who requested the job cannot approve its run; another admin can."""
    cairn.set_policy(run_approval="admin")
    job = cairn.submit(WRITE_B, actor="bob")
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_run_approval
    with pytest.raises(NotAllowed, match="own job"):
        cairn.approve(job.id, actor="bob")
    with pytest.raises(NotAllowed, match="admin"):
        cairn.approve(job.id, actor="alice")
    cairn.approve(job.id, actor="admin")
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review


def test_rule_3_admin_may_reject_own_final_pr_with_a_reason(cairn: Cairn) -> None:
    """Integration gate: an admin may reject their own request; the reason is recorded."""
    job = cairn.submit(WRITE_B, actor="bob")
    cairn.work()
    with pytest.raises(UsageError, match="reason"):
        cairn.reject(job.id, "  ", actor="bob")
    with pytest.raises(NotAllowed):
        cairn.reject(job.id, "members cannot decide", actor="alice")
    cairn.reject(job.id, "not the approach we want", actor="bob")
    rejected = cairn.detail(job.id)
    assert (rejected["status"], rejected["stage"]) == ("rejected", "rejected")
    assert rejected["decisions"][-1] | {"at": None, "policy": None} == {
        "gate": "integration",
        "verdict": "rejected",
        "actor": "bob",
        "reason": "not the approach we want",
        "at": None,
        "policy": None,
    }
    assert cairn.git("branch", "--list", "cairn/*") == ""


def test_rule_4_dependency_needs_exact_version_approval(cairn: Cairn) -> None:
    """Only one exact version reaches a person; approving it records that exact ask."""
    ranged = cairn.submit(DEPENDENCY_THEN_WRITE.replace('"2.4.0"', '">=2"'))
    cairn.work()
    refused = cairn.detail(ranged.id)
    assert refused["status"] == "failed" and "not one exact version" in refused["diagnosis"]
    assert refused["dependency_requests"] == []

    exact = cairn.submit(DEPENDENCY_THEN_WRITE)
    cairn.work()
    asked = cairn.detail(exact.id)["dependency_requests"]
    assert [(d["ecosystem"], d["name"], d["version"], d["status"]) for d in asked] == [
        ("pypi", "termcolor", "2.4.0", "pending")
    ]
    cairn.approve(exact.id)
    cairn.work()
    approved = cairn.detail(exact.id)
    assert approved["dependency_requests"][0]["status"] == "approved"
    assert [d["gate"] for d in approved["decisions"]] == ["run", "dependency"]
    # Installed inside the workspace's boundary, recorded in its declarations and lockfile.
    workspace = cairn.workspace(exact.id)
    assert '"termcolor==2.4.0"' in (workspace / "pyproject.toml").read_text()
    assert (workspace / ".venv" / ".cairn-dependencies").is_file()
    assert not (workspace / ".venv").is_symlink()


def test_rule_4_rejected_dependency_is_told_to_the_agent(cairn: Cairn, turns: Turns) -> None:
    job = cairn.submit(DEPENDENCY_THEN_WRITE)
    cairn.work()
    cairn.reject(job.id, "use the standard library instead")
    cairn.work()
    assert any("use the standard library instead" in n for n in turns.notes(job.id))
    assert cairn.detail(job.id)["dependency_requests"][0]["status"] == "rejected"


def test_rule_5_dirty_baseline_stops_without_touching_it(cairn: Cairn) -> None:
    """A checkout with uncommitted changes blocks the job; nothing is cleaned; resume continues."""
    readme = cairn.repo / "README.md"
    edited = readme.read_bytes() + b"\nwork in progress\n"
    readme.write_bytes(edited)
    (cairn.repo / "notes.txt").write_text("untracked notes\n")
    job = cairn.submit(WRITE_B)
    cairn.work()
    blocked = cairn.detail(job.id)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "preparing_baseline")
    assert "uncommitted changes" in blocked["diagnosis"] and "README.md" in blocked["diagnosis"]
    assert readme.read_bytes() == edited
    assert (cairn.repo / "notes.txt").read_text() == "untracked notes\n"
    assert cairn.git("stash", "list") == ""

    cairn.git("add", "-A")
    cairn.git("-c", "user.name=Owner", "-c", "user.email=o@example.com", "commit", "-qm", "wip")
    with cairn.store.begin() as conn:
        from cairn.jobs import gates

        gates.resume(conn, job.id, "alice")
    # A diagnosis belongs to the state it explains: the block's is gone once the job moves on.
    assert cairn.detail(job.id)["diagnosis"] is None
    cairn.work()
    resumed = cairn.detail(job.id)
    assert resumed["stage"] == "awaiting_review"
    assert resumed["baseline"] == cairn.git("rev-parse", "main")
    assert resumed["diagnosis"] is None and "uncommitted" not in resumed["feed"]


def test_rule_5_files_a_merge_of_this_host_is_writing_are_not_uncommitted_work(
    cairn: Cairn,
) -> None:
    """A checkout another job is fast-forwarding (under the mirror's lock) blocks nothing."""
    mirror = Mirror(
        cairn.config.mirror_path(cairn.store.installation_id, 1), str(cairn.repo), "main"
    )
    job = cairn.submit(WRITE_B)
    worker = threading.Thread(target=cairn.work)
    with mirror.lock():
        (cairn.repo / "merged.txt").write_text("what the fast-forward is writing\n")
        worker.start()
        deadline = time.monotonic() + 60
        while cairn.job(job.id).stage is not Stage.preparing_baseline:
            assert time.monotonic() < deadline, "the job never reached its baseline"
            time.sleep(0.01)
        time.sleep(0.5)  # the job's first look sees merged.txt, then waits for the lock
        cairn.git("add", "merged.txt")
        cairn.git("-c", "user.name=Merge", "-c", "user.email=m@example.com", "commit", "-qm", "m")
    worker.join(timeout=120)
    detail = cairn.detail(job.id)
    assert (detail["status"], detail["stage"]) == ("waiting", "awaiting_review"), detail[
        "diagnosis"
    ]
    assert detail["baseline"] == cairn.git("rev-parse", "main")


def test_rule_5_locks_a_killed_fast_forward_left_are_named_not_removed(cairn: Cairn) -> None:
    """Files and index moved, branch not, git's locks left: the job stops, names the locks,
    and touches nothing (a person's repository is never cleaned)."""
    tip = cairn.git("rev-parse", "main")
    target = commit_file(cairn.repo, "merged.txt", "from an earlier job\n", "Merge job 0")
    cairn.git("reset", "--quiet", "--hard", tip)
    kill_fast_forward_midway(cairn.repo, None, target)
    index = (cairn.repo / ".git" / "index").read_bytes()
    job = cairn.submit(WRITE_B)
    cairn.work()
    blocked = cairn.detail(job.id)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "preparing_baseline")
    assert (
        "left HEAD.lock, refs/heads/main.lock in the repository's git folder"
        in (blocked["diagnosis"])
    )
    assert "delete those files, then resume" in blocked["diagnosis"]
    assert str(cairn.repo) not in blocked["diagnosis"]
    assert cairn.git("rev-parse", "main") == tip
    assert (cairn.repo / ".git" / "index").read_bytes() == index
    assert all(
        (cairn.repo / ".git" / lock).exists() for lock in ("HEAD.lock", "refs/heads/main.lock")
    )


def test_rule_6_progress_not_logs(cairn: Cairn, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only allowlisted stages; the diagnosis is bounded and holds no home path or env value."""
    monkeypatch.setenv("CAIRN_TEST_API_TOKEN", "tok-9f8e7d6c5b4a")
    script = """
steps:
  - write: {path: a.txt, content: "x"}
  - run: "pwd; echo $CAIRN_TEST_API_TOKEN; echo $HOME; seq 200; exit 3"
"""
    job = cairn.submit(script)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    diagnosis = detail["diagnosis"]
    assert len(diagnosis) <= 500
    assert "tok-9f8e7d6c5b4a" not in diagnosis
    assert str(cairn.config.home) not in diagnosis and str(cairn.tmp) not in diagnosis
    assert "exit" in diagnosis and "3" in diagnosis
    assert {e["stage"] for e in detail["events"]} <= {s.value for s in Stage}


def test_rule_7_first_edit_must_edit_fails_a_second_unchanged_result(cairn: Cairn) -> None:
    job = cairn.submit("steps:\n  - finish: {summary: looked around}\n")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed" and "second unchanged result" in detail["diagnosis"]
    assert detail["usage"]["agent_runs"] == 2 and detail["usage"]["corrective_runs"] == 1


def test_rule_7_corrective_run_continues_same_context(cairn: Cairn) -> None:
    script = """
steps:
  - finish: {summary: "explained the starter"}
  - write: {path: made.txt, content: "a real change\\n"}
  - finish: {summary: "made a change"}
"""
    job = cairn.submit(script)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review"
    assert detail["usage"]["corrective_runs"] == 1
    assert "made a change" in detail["review"]["summary"]


def test_rule_7_applies_only_to_the_first_job_in_a_room(cairn: Cairn) -> None:
    first = cairn.submit(WRITE_B)
    cairn.work()
    second = cairn.submit("steps:\n  - finish: {summary: nothing}\n")
    cairn.work()
    detail = cairn.detail(second.id)
    assert cairn.job(first.id).stage is Stage.awaiting_review
    assert detail["status"] == "failed" and detail["usage"]["corrective_runs"] == 0


def test_rule_8_fresh_context_for_scheduled_work(cairn: Cairn, turns: Turns) -> None:
    """Each scheduled run starts from a fresh context of its own, never the previous run's."""
    first = cairn.submit(WRITE_B, "nightly", kind="scheduled")
    cairn.work()
    cairn.approve(first.id)
    cairn.work()
    second = cairn.submit(WRITE_B.replace("b.txt", "c.txt"), "nightly", kind="scheduled")
    cairn.work()
    assert turns.first_context(first.id) is None and turns.first_context(second.id) is None
    assert (cairn.workspace(second.id) / "c.txt").is_file(), "the second run did its own steps"
    assert "job B done" in cairn.detail(second.id)["review"]["summary"]
    assert cairn.job(second.id).stage is Stage.awaiting_review


def test_rule_9_lost_stream_after_changes_continues_the_same_job(cairn: Cairn) -> None:
    script = """
steps:
  - write: {path: kept.txt, content: "written before the stream was lost\\n"}
  - lose_stream: {}
  - write: {path: never.txt, content: "never written\\n"}
"""
    job = cairn.submit(script)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review"
    assert detail["usage"]["agent_runs"] == 1
    assert _branch_files(cairn, detail) >= {"kept.txt"} and "never.txt" not in _branch_files(
        cairn, detail
    )


def test_rule_9_lost_stream_without_changes_starts_a_new_attempt(cairn: Cairn) -> None:
    script = """
steps:
  - lose_stream: {}
  - write: {path: second.txt, content: "second attempt\\n"}
  - finish: {summary: "done on the second attempt"}
"""
    job = cairn.submit(script)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review"
    agent_runs = [s for s in detail["stages"] if s["name"] == "running_agent"]
    assert [s["status"] for s in agent_runs] == ["failed", "accepted"]
    assert agent_runs[0]["evidence"]["outcome"]["value"] == "interrupted"


def _branch_files(cairn: Cairn, detail: dict) -> set[str]:
    """Files on the job branch in cairn's mirror (the branch is not pushed before delivery)."""
    mirror = cairn.config.mirror_path(cairn.store.installation_id, 1)
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", detail["branch"]],
        cwd=mirror,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(listing.split())


def test_rule_6_same_body_with_a_different_diagnosis_is_a_different_result(cairn: Cairn) -> None:
    """Outcomes are told apart by their (masked, bounded) diagnosis, not only by their body."""
    scripts = [
        "steps:\n  - write: {path: a.txt, content: a}\n  - fail: could not find the entry point\n",
        "steps:\n  - write: {path: a.txt, content: a}\n  - fail: could not find the entry point\n",
        "steps:\n  - write: {path: a.txt, content: a}\n  - fail: the tests do not import\n",
    ]
    jobs = [cairn.submit(script) for script in scripts]
    cairn.work()
    first, same, other = (cairn.detail(job.id) for job in jobs)
    assert first["status"] == same["status"] == other["status"] == "failed"
    assert first["result_fingerprint"] == other["result_fingerprint"]
    assert first["outcome_id"] == same["outcome_id"]
    assert first["outcome_id"] != other["outcome_id"]
    # What an outcome offers to do next is part of it too.
    ended = cairn.job(jobs[0].id)
    offering = dataclasses.replace(ended, next_actions=(NextAction(Action.retry, job=ended.id),))
    assert outcome_id(ended) == first["outcome_id"] != outcome_id(offering)
