"""After the agent: verify, commit and summarize, then wait at the integration gate."""

from __future__ import annotations

import subprocess

from cairn.jobs.drive import Drive
from cairn.sanitize import SUMMARY_LIMIT
from cairn.stages import Stage, Status
from cairn.store import stage_runs

VERIFY_TIMEOUT_SECONDS = 1800
_OUTPUT_TAIL_LINES = 15


def verifying(drive: Drive) -> None:
    """Run the room's verify command against the result; a failure ends the job, with why."""
    command = drive.room.verify_command
    tree = drive.worktree.content_id()
    attempt = drive.attempt(Stage.verifying, {"tree": tree, "command": command})
    if not command:
        attempt.accept(tree, {"verify": "no verify command"})
        drive.move(Stage.summarizing)
        return
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=drive.worktree.path,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=VERIFY_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        attempt.reject(tree, {"exit_status": None, "timed_out": True})
        drive.stop(Status.failed, f"the verify command ran longer than {VERIFY_TIMEOUT_SECONDS} s")
        return
    if done.returncode != 0:
        attempt.reject(tree, {"exit_status": done.returncode})
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-_OUTPUT_TAIL_LINES:])
        drive.stop(
            Status.failed, f"the verify command failed (exit status {done.returncode}):\n{tail}"
        )
        return
    attempt.accept(tree, {"exit_status": 0})
    drive.move(Stage.summarizing)


def summarizing(drive: Drive) -> None:
    """Commit the result to the job branch and write the summary the reviewer will read."""
    baseline = drive.job.baseline or ""
    tree = drive.worktree.content_id()
    attempt = drive.attempt(Stage.summarizing, {"tree": tree, "baseline": baseline})
    with drive.mirror.lock():
        commit = drive.worktree.commit(
            baseline, f"{drive.job.branch}: {_first_line(drive.request.text)}"
        )
    changed = drive.worktree.changed_files(baseline)
    told = _agent_summary(drive) or "The agent did not write a summary."
    summary = drive.sanitizer.clean(f"{told}\n\n{drive.worktree.diffstat(baseline)}", SUMMARY_LIMIT)
    attempt.accept(tree, {"files_changed": len(changed), "commit": commit})
    drive.move(Stage.awaiting_review, Status.waiting, summary=summary, result_fingerprint=tree)


def review_approved(drive: Drive) -> None:
    """The integration gate approved the result; delivery is the runner's work."""
    drive.move(Stage.delivering)


def _agent_summary(drive: Drive) -> str | None:
    with drive.store.begin() as conn:
        runs = stage_runs.for_job(conn, drive.job.id)
    accepted = [r for r in runs if r.stage == Stage.running_agent and r.status == "accepted"]
    return (accepted[-1].evidence or {}).get("agent_summary") if accepted else None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "job"
    return line[:72]
