"""After the agent: verify, commit and summarize, then wait at the integration gate."""

from __future__ import annotations

from cairn.jobs.drive import Drive
from cairn.sanitize import SUMMARY_LIMIT
from cairn.stages import Stage, Status
from cairn.store import stage_runs
from cairn.workspace.commands import CommandResult, run_in_workspace

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
    result = run_in_workspace(
        command,
        drive.worktree.path,
        timeout=VERIFY_TIMEOUT_SECONDS,
        should_stop=drive.stop_requested,
        allow_unsandboxed=drive.allow_unsandboxed,
    )
    after = drive.worktree.content_id()
    evidence = {"exit_status": result.exit_code}
    problem = _verify_problem(result, changed=after != tree)
    if problem:
        attempt.reject(after, evidence)
        drive.stop(Status.failed, problem)
        return
    attempt.accept(tree, evidence)
    drive.move(Stage.summarizing)


def _verify_problem(result: CommandResult, *, changed: bool) -> str | None:
    tail = "\n".join(result.output.strip().splitlines()[-_OUTPUT_TAIL_LINES:])
    if result.stopped:
        return "verification stopped: this runner lost the job"
    if result.exit_code is None:
        return f"the verify command ran longer than {VERIFY_TIMEOUT_SECONDS} s"
    if result.exit_code != 0:
        return f"the verify command failed (exit status {result.exit_code}):\n{tail}"
    if changed:
        # What is delivered must be what was verified: a command that edits the result
        # would deliver files nobody checked.
        return (
            "the verify command changed files in the workspace; make it leave the result as it "
            "found it (or ignore what it writes in .gitignore)"
        )
    return None


def summarizing(drive: Drive) -> None:
    """Commit the verified result to the job branch and write the summary the reviewer reads."""
    baseline = drive.job.baseline or ""
    tree = drive.worktree.content_id()
    attempt = drive.attempt(Stage.summarizing, {"tree": tree, "baseline": baseline})
    with drive.store.begin() as conn:
        verified = stage_runs.last_accepted(conn, drive.job.id, Stage.verifying)
        agent = stage_runs.last_accepted(conn, drive.job.id, Stage.running_agent)
    if verified is None or verified.content_id != tree:
        attempt.reject(tree, {"verified_tree": verified.content_id if verified else None})
        drive.stop(Status.failed, "the workspace changed after verification; nothing was delivered")
        return
    with drive.mirror.lock():
        commit = drive.worktree.commit(
            baseline, f"{drive.job.branch}: {_first_line(drive.request.text)}"
        )
    told = (agent.evidence or {}).get("agent_summary") if agent else None
    summary = drive.sanitizer.clean(
        f"{told or 'The agent did not write a summary.'}\n\n{drive.worktree.diffstat(baseline)}",
        SUMMARY_LIMIT,
    )
    changed = drive.worktree.changed_files(baseline)
    attempt.accept(tree, {"files_changed": len(changed), "commit": commit})
    drive.move(Stage.awaiting_review, Status.waiting, summary=summary, result_fingerprint=tree)


def review_approved(drive: Drive) -> None:
    """The integration gate approved the result; delivery is the runner's work."""
    drive.move(Stage.delivering)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "job"
    return line[:72]
