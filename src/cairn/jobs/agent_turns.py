"""The agent stage and the dependency gate around it."""

from __future__ import annotations

import time
from typing import Any

from cairn.agents.base import Agent, DependencyAsk, Outcome, OutcomeKind, Turn
from cairn.agents.registry import get_agent
from cairn.deps.requests import dependency_problem, label
from cairn.errors import LeaseLost
from cairn.jobs import context
from cairn.jobs.drive import Drive, StageAttempt
from cairn.sanitize import SUMMARY_LIMIT
from cairn.stages import Stage, Status
from cairn.store import decisions, progress, stage_runs
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger
from cairn.store.records import StageRun

MAX_INTERRUPTED_ATTEMPTS = 3
CORRECTIVE_NOTE = (
    "corrective run: the workspace is still identical to the starter; change a file, "
    "request a dependency, or fail with a clear reason"
)


def running_agent(drive: Drive) -> None:
    """One agent turn in the job's own context; the workspace decides what it achieved."""
    agent = get_agent(drive.request.agent)
    history = _agent_runs(drive)
    corrective = any((run.evidence or {}).get("corrective_next") for run in history)
    attempt = drive.attempt(
        Stage.running_agent,
        {
            "request": drive.request.id,
            "start_tree": drive.worktree.content_id(),
            "corrective": corrective,
        },
    )
    with drive.fenced() as conn:
        saved = context.load(conn, drive.job.id)
    # An outcome saved before a crash is settled as it was, never produced a second time.
    outcome = saved.outcome or _take_turn(drive, agent, saved, corrective)
    _settle(drive, agent, attempt, outcome, corrective, history)


def _take_turn(drive: Drive, agent: Agent, saved: context.JobContext, corrective: bool) -> Outcome:
    def save_state(state: dict[str, Any], outcome: Outcome | None = None) -> None:
        if drive.stop_requested():
            raise LeaseLost(f"job {drive.job.id} was taken from this runner")
        with drive.fenced() as conn:
            context.save_agent_state(conn, drive.job.id, agent.name, state, outcome)

    turn = Turn(
        job_id=drive.job.id,
        workspace=drive.worktree.path,
        request=drive.sanitizer.mask(drive.request.text),
        state=saved.agent_state,
        save_state=save_state,
        workspace_id=drive.worktree.content_id,
        notes=tuple(saved.inbox),
        stop_requested=drive.stop_requested,
        allow_unsandboxed=drive.allow_unsandboxed,
    )
    started = time.monotonic()
    outcome = agent.run_turn(turn)
    with drive.fenced() as conn:
        progress.add_usage(
            conn,
            drive.job.id,
            agent=agent.name,
            seconds=time.monotonic() - started,
            run_kind="corrective" if corrective else "normal",
        )
    return outcome


def _settle(
    drive: Drive,
    agent: Agent,
    attempt: StageAttempt,
    outcome: Outcome,
    corrective: bool,
    history: list[StageRun],
) -> None:
    if outcome.kind is OutcomeKind.dependency_request:
        assert outcome.dependency is not None
        _ask_for_dependency(drive, agent, attempt, outcome.dependency)
        return
    if outcome.kind is OutcomeKind.failed:
        attempt.reject(None, {"outcome": outcome.kind.value})
        drive.stop(Status.failed, outcome.diagnosis or "the agent failed without saying why")
        return
    changed = drive.worktree.changed_files(drive.job.baseline or "")
    evidence: dict[str, Any] = {"outcome": outcome.kind.value, "files_changed": len(changed)}
    if changed:
        # Rule 9: a lost stream that left changes continues to verification in this same job.
        summary = drive.sanitizer.clean(outcome.summary, SUMMARY_LIMIT) if outcome.summary else None
        attempt.accept(drive.worktree.content_id(), evidence | {"agent_summary": summary})
        drive.move(Stage.verifying)
    elif outcome.kind is OutcomeKind.interrupted:
        _retry_or_fail_interrupted(drive, agent, attempt, evidence, history)
    else:
        _first_edit_must_edit(drive, agent, attempt, evidence, corrective)


def _retry_or_fail_interrupted(
    drive: Drive, agent: Agent, attempt: StageAttempt, evidence: dict, history: list[StageRun]
) -> None:
    """Rule 9: a lost stream that changed nothing may start a new attempt, a bounded number."""
    attempt.reject(None, evidence)
    lost = 1 + sum(1 for run in history if (run.evidence or {}).get("outcome") == "interrupted")
    if lost >= MAX_INTERRUPTED_ATTEMPTS:
        drive.stop(
            Status.failed,
            f"the agent stopped answering {lost} times without changing any file; "
            "submit the request again to start a new job",
        )
        return
    with drive.fenced() as conn:
        context.settle(conn, drive.job.id, drive.agent_name)


def _first_edit_must_edit(
    drive: Drive, agent: Agent, attempt: StageAttempt, evidence: dict, corrective: bool
) -> None:
    """Rule 7: an unchanged first job gets exactly one corrective run in the same context."""
    if not corrective and _is_first_job_in_room(drive):
        attempt.reject(None, evidence | {"corrective_next": True})
        with drive.fenced() as conn:
            context.settle(conn, drive.job.id, drive.agent_name)
            context.post_note(conn, drive.job.id, agent.name, CORRECTIVE_NOTE)
        return
    attempt.reject(None, evidence)
    why = "a second unchanged result" if corrective else "an unchanged workspace"
    drive.stop(Status.failed, f"the agent finished with {why}; nothing was delivered")


def _is_first_job_in_room(drive: Drive) -> bool:
    with drive.store.begin() as conn:
        return job_ledger.list_jobs(conn, drive.room.id)[0].id == drive.job.id


def _agent_runs(drive: Drive) -> list[StageRun]:
    with drive.store.begin() as conn:
        runs = stage_runs.for_job(conn, drive.job.id)
    return [run for run in runs if run.stage == Stage.running_agent and run.status != "running"]


def _ask_for_dependency(
    drive: Drive, agent: Agent, attempt: StageAttempt, ask: DependencyAsk
) -> None:
    problem = dependency_problem(ask)
    if problem:
        attempt.reject(None, {"outcome": "dependency_request", "refused": problem})
        drive.stop(Status.failed, f"the agent's dependency request was refused: {problem}")
        return
    attempt.pause({"outcome": "dependency_request"})
    with drive.fenced() as conn:
        dep_ledger.add(
            conn,
            drive.job.id,
            ecosystem=ask.ecosystem,
            name=ask.name,
            version=ask.version,
            reason=drive.sanitizer.clean(ask.reason),
        )
        context.settle(conn, drive.job.id, drive.agent_name)
        drive.job = job_ledger.transition(
            conn, drive.job, Stage.awaiting_dependency_approval, Status.waiting
        )
    drive.on_progress(drive.job)


def dependency_decided(drive: Drive) -> None:
    """After the dependency gate: install when approved, tell the agent when rejected."""
    with drive.store.begin() as conn:
        decided = dep_ledger.latest(conn, drive.job.id)
        reasons = {d.id: d.reason for d in decisions.for_job(conn, drive.job.id)}
    if decided.status == dep_ledger.APPROVED:
        drive.move(Stage.installing_dependency)
        return
    reason = reasons.get(decided.decision_id or -1) or "no reason given"
    what = label(decided.ecosystem, decided.name, decided.version)
    _note_and_resume(drive, f"dependency {what} was rejected: {reason}")


def installing_dependency(drive: Drive) -> None:
    """The constrained installer is not part of this slice: record the approval for the agent."""
    with drive.store.begin() as conn:
        approved = dep_ledger.latest(conn, drive.job.id)
    attempt = drive.attempt(Stage.installing_dependency, {"request": approved.id})
    attempt.accept(None, {"packages_installed": 0, "installer": "not available in this version"})
    what = label(approved.ecosystem, approved.name, approved.version)
    _note_and_resume(drive, f"dependency {what} was approved")


def _note_and_resume(drive: Drive, note: str) -> None:
    with drive.fenced() as conn:
        context.post_note(conn, drive.job.id, drive.agent_name, note)
        drive.job = job_ledger.transition(conn, drive.job, Stage.running_agent, Status.running)
    drive.on_progress(drive.job)
