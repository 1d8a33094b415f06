"""After the agent: verify, commit and summarize, then the integration gate (engine stages)."""

from __future__ import annotations

import re

from cairn.canonical import digest
from cairn.engine import (
    Evidence,
    Expect,
    Measurement,
    Pause,
    Result,
    RunRecord,
    StageDef,
    StageFailed,
    Upstream,
)
from cairn.errors import BoundaryError
from cairn.jobs import follow_ups
from cairn.jobs.deliver_forge import is_pull_request_room, publish_for_review
from cairn.jobs.drive import Drive
from cairn.sanitize import SUMMARY_LIMIT
from cairn.stages import Gate, Stage, Verdict
from cairn.store import decisions
from cairn.workspace.commands import CommandResult, run_in_workspace

VERIFY_TIMEOUT_SECONDS = 1800
_OUTPUT_TAIL_LINES = 15
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
_PYTEST_COLLECTED = re.compile(r"collected (\d+) items?")
_JEST_TOTAL = re.compile(r"Tests:.*?(\d+) total")
_JEST_DONE = re.compile(r"Tests:.*?(\d+) passed")


def _verified(tree: str, command: str | None, exit_status: int | None) -> str:
    return digest({"tree": tree, "command": command, "exit_status": exit_status})


def _verify(drive: Drive, upstream: Upstream) -> Result:
    """Run the room's verify command against the result; a failure ends the job, with why."""
    command = drive.room.verify_command
    if not command:
        # Nothing runs, so what stands verified is the agent's accepted result; summarizing
        # measures the workspace again and delivers nothing that differs from it.
        tree = upstream[Stage.running_agent].content_id or ""
        noted = Measurement("verified", "no verify command")
        return Result(_verified(tree, None, None), Evidence.of(noted, Measurement("tree", tree)))
    tree = drive.worktree.content_id()
    try:
        result = run_in_workspace(
            command,
            drive.worktree.path,
            timeout=VERIFY_TIMEOUT_SECONDS,
            should_stop=drive.stop_requested,
            allow_unsandboxed=drive.allow_unsandboxed,
            hidden=(drive.config.home,),
        )
    except BoundaryError as exc:
        # A failure, not a block: resuming would only verify, and then deliver, the link.
        raise StageFailed(f"the verify command broke the workspace boundary: {exc}") from exc
    evidence = Evidence.of(
        Measurement("verified", "verify command"),
        Measurement("exit_status", result.exit_code, Expect.equals, 0),
        Measurement("sandboxed", result.sandboxed),
        Measurement("tree", tree),
        *_test_counts(command, result.output),
    )
    problem = _verify_problem(result, changed=drive.worktree.content_id() != tree)
    if problem:
        raise StageFailed(problem, evidence)
    return Result(_verified(tree, command, 0), evidence)


def _test_counts(command: str, output: str) -> list[Measurement]:
    """Tests run vs collected, where the verify command is pytest or npm test and says so."""
    if "pytest" in command:
        counts = {kind.rstrip("s"): int(n) for n, kind in _PYTEST_COUNT.findall(output)}
        ran = sum(counts.values())
        collected = _PYTEST_COLLECTED.search(output)
        total = int(collected.group(1)) if collected else None
    elif "npm test" in command or "jest" in command:
        done, total_match = _JEST_DONE.search(output), _JEST_TOTAL.search(output)
        ran, total = (
            (int(done.group(1)) if done else 0),
            (int(total_match.group(1)) if total_match else None),
        )
    else:
        return []
    if total is None:
        return [Measurement("tests_run", ran)]
    return [Measurement("tests_run", ran, Expect.all_of, total, "collected")]


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


def _verify_now(drive: Drive, prior: RunRecord) -> str:
    exit_status = prior.evidence.get_int("exit_status")
    return _verified(drive.worktree.content_id(), drive.room.verify_command, exit_status)


def _summarize(drive: Drive, upstream: Upstream) -> Result:
    """Commit the verified result to the job branch and write the summary the reviewer reads."""
    baseline = drive.job.baseline or ""
    tree = drive.worktree.content_id()
    with drive.store.read() as conn:
        mark = max((d.id for d in decisions.for_job(conn, drive.job.id)), default=0)
    if upstream[Stage.verifying].evidence.get_str("tree") != tree:
        raise StageFailed("the workspace changed after verification; nothing was delivered")
    with drive.mirror.lock():
        commit = drive.worktree.commit(baseline, drive.commit_message, tree=tree)
    told = upstream[Stage.running_agent].evidence.get_str("agent_summary")
    # The commit holds exactly `tree` (checked above against what was verified).
    diffstat = drive.worktree.diffstat(baseline, tree)
    summary = drive.sanitizer.clean(review_text(told, diffstat.text), SUMMARY_LIMIT)
    changed = drive.worktree.changed_files(baseline, tree)
    listed = sum(1 for path in changed if path in diffstat.counted)
    drive.record(summary=summary, result_fingerprint=tree)
    return Result(
        commit,
        Evidence.of(
            Measurement("files_summarized", listed, Expect.all_of, len(changed)),
            Measurement("commit", commit),
            Measurement("tree", tree),
            # The integration gate accepts only a decision made after this summary was written.
            Measurement("decision_mark", mark),
        ),
    )


def review_text(told: str | None, diffstat: str) -> str:
    """What the reviewer reads: the agent's words fenced off, then cairn's own diffstat.

    Every line the agent wrote is indented under its label, so no line of it can pass for a
    line cairn prints (a fake diffstat, a decision, a diagnosis).
    """
    said = (told or "").splitlines() or ["(the agent wrote no summary)"]
    fenced = "\n".join(f"  | {line}" for line in said)
    return f"The agent's summary:\n{fenced}\n\nWhat changed:\n{diffstat}"


def _summary_now(drive: Drive, prior: RunRecord) -> str | None:
    head, head_tree = drive.worktree.tip()
    on_branch = head == prior.content_id
    return prior.content_id if on_branch and head_tree == drive.worktree.content_id() else None


def _review(drive: Drive, upstream: Upstream) -> Result:
    """The integration gate: an approval made after this result was summarized, or a pause."""
    summarized = upstream[Stage.summarizing]
    if is_pull_request_room(drive):
        # The reviewer reviews the pull request itself: it is there before the job waits.
        publish_for_review(drive, summarized.content_id or "")
    with drive.store.read() as conn:
        made = decisions.for_job(conn, drive.job.id)
    mark = summarized.evidence.get_int("decision_mark") or 0
    later = [d for d in made if d.gate == Gate.integration and d.id > mark]
    if not later or later[-1].verdict != Verdict.approved:
        raise Pause(Stage.awaiting_review.value)
    decision = later[-1]
    return Result(
        digest({"decision": decision.id, "commit": summarized.content_id}),
        Evidence.of(
            Measurement("approved_by", decision.actor), Measurement("decision", decision.id)
        ),
    )


VERIFY: StageDef[Drive] = StageDef(
    name=Stage.verifying.value,
    run=_verify,
    inputs=lambda drive: {"command": drive.room.verify_command},
    required=("verified", "tree"),
    content_now=_verify_now,
    needs=(Stage.running_agent.value,),
)
SUMMARY: StageDef[Drive] = StageDef(
    name=Stage.summarizing.value,
    run=_summarize,
    # After a reply the summary is the new turn's, even when the turn changed no file.
    inputs=follow_ups.agent_inputs,
    required=("files_summarized", "commit"),
    content_now=_summary_now,
    needs=(Stage.running_agent.value, Stage.verifying.value),
)
REVIEW: StageDef[Drive] = StageDef(
    name=Stage.awaiting_review.value,
    run=_review,
    required=("approved_by",),
    content_now=lambda drive, prior: prior.content_id,
    needs=(Stage.summarizing.value,),
)
