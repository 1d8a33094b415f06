"""The agent stage and the dependency gate around it."""

from __future__ import annotations

import re
import time

from cairn.agents.base import DependencyAsk, Outcome, OutcomeKind, Turn
from cairn.agents.registry import get_agent
from cairn.jobs import context
from cairn.jobs.drive import Drive, StageAttempt
from cairn.stages import Stage, Status
from cairn.store import decisions, progress, stage_runs
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger

MAX_INTERRUPTED_ATTEMPTS = 3
ECOSYSTEMS = ("pypi", "npm")
_EXACT_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+-]*$")


def running_agent(drive: Drive) -> None:
    """One agent turn in the job's own context; the workspace decides what it achieved."""
    agent = get_agent(drive.request.agent)
    history = _agent_runs(drive)
    corrective = any((run.evidence or {}).get("corrective_next") for run in history)
    start_tree = drive.worktree.content_id()
    attempt = drive.attempt(
        Stage.running_agent,
        {"request": drive.request.id, "start_tree": start_tree, "corrective": corrective},
    )
    with drive.fenced() as conn:
        state, notes = context.load(conn, drive.job.id)

    def save_state(new_state: dict) -> None:
        with drive.fenced() as conn:
            context.save_agent_state(conn, drive.job.id, agent.name, new_state)

    turn = Turn(
        job_id=drive.job.id,
        workspace=drive.worktree.path,
        request=drive.sanitizer.mask(drive.request.text),
        state=state,
        save_state=save_state,
        notes=tuple(notes),
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
    _settle(drive, attempt, outcome, corrective, history)


def _settle(
    drive: Drive, attempt: StageAttempt, outcome: Outcome, corrective: bool, history: list
) -> None:
    if outcome.kind is OutcomeKind.dependency_request:
        assert outcome.dependency is not None
        _ask_for_dependency(drive, attempt, outcome.dependency)
        return
    if outcome.kind is OutcomeKind.failed:
        attempt.reject(None, {"outcome": outcome.kind.value})
        drive.stop(Status.failed, outcome.diagnosis or "the agent failed without saying why")
        return
    baseline = drive.job.baseline or ""
    changed = drive.worktree.changed_files(baseline)
    tree = drive.worktree.content_id()
    evidence = {"outcome": outcome.kind.value, "files_changed": len(changed)}
    if changed:
        # Rule 9: a lost stream that left changes continues to verification in this same job.
        attempt.accept(tree, evidence | {"agent_summary": outcome.summary})
        drive.move(Stage.verifying)
    elif outcome.kind is OutcomeKind.interrupted:
        _retry_or_fail_interrupted(drive, attempt, evidence, history)
    else:
        _first_edit_must_edit(drive, attempt, evidence, corrective)


def _retry_or_fail_interrupted(
    drive: Drive, attempt: StageAttempt, evidence: dict, history: list
) -> None:
    """Rule 9: a lost stream that changed nothing may start a new attempt, a bounded number."""
    attempt.reject(None, evidence)
    lost = 1 + sum(1 for run in history if (run.evidence or {}).get("outcome") == "interrupted")
    if lost >= MAX_INTERRUPTED_ATTEMPTS:
        drive.stop(
            Status.failed,
            f"the agent stopped answering {lost} times without changing any file; "
            "`cairn retry` would start a new job",
        )


def _first_edit_must_edit(
    drive: Drive, attempt: StageAttempt, evidence: dict, corrective: bool
) -> None:
    """Rule 7: an unchanged first job gets exactly one corrective run in the same context."""
    if not corrective and _is_first_job_in_room(drive):
        attempt.reject(None, evidence | {"corrective_next": True})
        with drive.fenced() as conn:
            context.post_note(
                conn,
                drive.job.id,
                get_agent(drive.request.agent).name,
                "corrective run: the workspace is still identical to the starter; change a file, "
                "request a dependency, or fail with a clear reason",
            )
        return
    attempt.reject(None, evidence)
    why = "a second unchanged result" if corrective else "an unchanged workspace"
    drive.stop(Status.failed, f"the agent finished with {why}; nothing was delivered")


def _is_first_job_in_room(drive: Drive) -> bool:
    with drive.store.begin() as conn:
        return job_ledger.list_jobs(conn, drive.room.id)[0].id == drive.job.id


def _agent_runs(drive: Drive) -> list:
    with drive.store.begin() as conn:
        runs = stage_runs.for_job(conn, drive.job.id)
    return [run for run in runs if run.stage == Stage.running_agent and run.status != "running"]


def _ask_for_dependency(drive: Drive, attempt: StageAttempt, ask: DependencyAsk) -> None:
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
        drive.job = job_ledger.transition(
            conn, drive.job, Stage.awaiting_dependency_approval, Status.waiting
        )
    drive.on_progress(drive.job)


def dependency_problem(ask: DependencyAsk) -> str | None:
    """Why a dependency request cannot be put to a person, or None when it can."""
    if ask.ecosystem not in ECOSYSTEMS:
        return f"unknown ecosystem {ask.ecosystem!r}; use one of {', '.join(ECOSYSTEMS)}"
    if not ask.name or len(ask.name) > 214 or any(c.isspace() for c in ask.name):
        return "the package name is empty, too long or contains spaces"
    if not _EXACT_VERSION.match(ask.version):
        return f"{ask.version!r} is not one exact version (ranges, URLs and paths are refused)"
    return None


def dependency_decided(drive: Drive) -> None:
    """After the dependency gate: install when approved, tell the agent when rejected."""
    with drive.store.begin() as conn:
        pending = dep_ledger.for_job(conn, drive.job.id)[-1]
        reasons = {d.id: d.reason for d in decisions.for_job(conn, drive.job.id)}
    if pending.status == dep_ledger.APPROVED:
        drive.move(Stage.installing_dependency)
        return
    reason = reasons.get(pending.decision_id or -1) or "no reason given"
    _note_and_resume(drive, f"dependency {_label(pending)} was rejected: {reason}")


def installing_dependency(drive: Drive) -> None:
    """The constrained installer is not part of this slice: record the approval for the agent."""
    with drive.store.begin() as conn:
        approved = dep_ledger.for_job(conn, drive.job.id)[-1]
    attempt = drive.attempt(Stage.installing_dependency, {"request": approved.id})
    attempt.accept(None, {"packages_installed": 0, "installer": "not available in this version"})
    _note_and_resume(drive, f"dependency {_label(approved)} was approved")


def _note_and_resume(drive: Drive, note: str) -> None:
    with drive.fenced() as conn:
        context.post_note(conn, drive.job.id, get_agent(drive.request.agent).name, note)
        drive.job = job_ledger.transition(conn, drive.job, Stage.running_agent, Status.running)
    drive.on_progress(drive.job)


def _label(request: dep_ledger.DependencyRequest) -> str:
    joiner = "@" if request.ecosystem == "npm" else "=="
    return f"{request.ecosystem} {request.name}{joiner}{request.version}"
