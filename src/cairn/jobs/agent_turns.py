"""The agent stage: one turn in the job's own context, and the dependency gate inside it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cairn.agents.base import Agent, DependencyAsk, JobFacts, Outcome, OutcomeKind, Turn
from cairn.agents.registry import get_agent
from cairn.canonical import Form, digest
from cairn.deps.requests import dependency_problem, label
from cairn.engine import Evidence, Expect, Measurement, Pause, Result, Retry, StageDef, StageFailed
from cairn.engine.workflow import Upstream
from cairn.errors import LeaseLost
from cairn.jobs import context, follow_ups
from cairn.jobs.dependencies import install_approved, missing_declarations
from cairn.jobs.drive import Drive
from cairn.jobs.ledger import run_record
from cairn.jobs.references import scheduled_references
from cairn.jobs.view import feed_message
from cairn.sanitize import SUMMARY_LIMIT
from cairn.stages import Stage
from cairn.store import context_steps, decisions, progress, stage_runs
from cairn.store import dependency_requests as dep_ledger
from cairn.store import effects as effect_ledger
from cairn.store import jobs as job_ledger
from cairn.store.records import ContextStep, RequestStatus, RunKind, StepKind

MAX_ATTEMPTS = 3
CORRECTIVE_NOTE = (
    "corrective run: the workspace is still identical to the starter; change a file, "
    "request a dependency, or fail with a clear reason"
)
_GATE = Stage.awaiting_dependency_approval.value
REPAIRED = "repaired"
REPAIR_UNPROVEN = "limit: the job's effects, events or feed changed during the summary repair"
REPAIR_UNCHECKED = "limit: the runner stopped before it checked the summary repair's effects"


def _agent(drive: Drive, upstream: Upstream) -> Result:
    """One agent turn in the job's own context; the workspace decides what it achieved."""
    _tell_dependency_decision(drive)
    agent = get_agent(drive.request.agent, drive.config)
    corrective = _corrective_is_due(drive)
    # Read without the write lock a fenced transaction takes: whatever follows from it is
    # written fenced, and refused if another runner holds the job by then.
    with drive.store.read() as conn:
        saved = context.load(conn, drive.job.id)
    # An outcome saved before a crash is settled as it was, never produced a second time.
    if saved.outcome is not None:
        outcome = saved.outcome
        if outcome.summary_repair == REPAIRED:
            # The crash came before cairn compared the effects and feed across the repair.
            outcome = replace(outcome, summary_repair=REPAIR_UNCHECKED)
    else:
        outcome = _take_turn(drive, agent, saved, corrective)
    return _settle(drive, outcome, corrective)


def _take_turn(drive: Drive, agent: Agent, saved: context.JobContext, corrective: bool) -> Outcome:
    def save_state(state: dict[str, Any], outcome: Outcome | None = None) -> None:
        if drive.stop_requested():
            raise LeaseLost(f"job {drive.job.id} was taken from this runner")
        # What an agent says is stored only masked (its diagnoses, summaries, asks).
        masked = outcome.masked(drive.sanitizer.mask) if outcome is not None else None
        with drive.fenced() as conn:
            context.save_agent_state(conn, drive.job.id, agent.name, state, masked)

    pending = follow_ups.for_turn(drive, saved)  # a reviewer's `cairn reply`, if any
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
        hidden_paths=(drive.config.home,),
        conversation=JobConversation(drive),
        follow_ups=pending.messages,
        fresh_opening=pending.fresh_opening,
        facts=JobFacts(
            kind=drive.request.kind,
            room=drive.room.name,
            base_branch=drive.room.base_branch,
            verify_command=drive.sanitizer.mask(drive.room.verify_command or "") or None,
            references=scheduled_references(drive),
        ),
        mask=drive.sanitizer.mask,
        installation_id=drive.store.installation_id,
        agent_home=drive.config.agent_state_path(drive.store.installation_id, drive.job.id),
    )
    started = time.monotonic()
    before = _side_effects(drive)
    outcome = agent.run_turn(turn)
    if outcome.summary_repair == REPAIRED and _side_effects(drive) != before:
        # The adapter proved the tree unchanged; the effects and the feed are cairn's to check.
        outcome = replace(outcome, summary_repair=REPAIR_UNPROVEN)
    with drive.fenced() as conn:
        # Tokens as the adapter's model reported them; the time is the turn's wall clock.
        progress.add_usage(
            conn,
            drive.job.id,
            agent=agent.name,
            seconds=time.monotonic() - started,
            run_kind=RunKind.corrective if corrective else RunKind.normal,
            input_tokens=outcome.usage.input_tokens,
            output_tokens=outcome.usage.output_tokens,
            model_requests=outcome.usage.model_requests,
        )
    return outcome


def _side_effects(drive: Drive) -> tuple[object, ...]:
    """What a summary repair must leave as it was: the job's effects, events and feed."""
    with drive.store.read() as conn:
        effects = [(e.id, e.kind, e.status) for e in effect_ledger.for_job(conn, drive.job.id)]
        events = [e.id for e in progress.events_for_job(conn, drive.job.id)]
        job = job_ledger.get_job(conn, drive.job.id)
    return tuple(effects), tuple(events), feed_message(job, drive.request)


class JobConversation:
    """The job's own append-only conversation, each step saved in a fenced transaction."""

    def __init__(self, drive: Drive) -> None:
        self._drive = drive

    def steps(self) -> list[ContextStep]:
        with self._drive.fenced() as conn:
            return context_steps.steps(conn, self._drive.job.id)

    def append(self, kind: StepKind, payload: Mapping[str, Any]) -> ContextStep:
        drive = self._drive
        if drive.stop_requested():
            raise LeaseLost(f"job {drive.job.id} was taken from this runner")
        with drive.fenced() as conn:
            last = context_steps.last_step(conn, drive.job.id)
            seq = 1 if last is None else last.seq + 1
            return context_steps.append(conn, drive.job.id, drive.token, seq, kind, payload)

    def restart(self, opening: Sequence[tuple[StepKind, Mapping[str, Any]]]) -> list[ContextStep]:
        drive = self._drive
        with drive.fenced() as conn:
            return context_steps.replace(conn, drive.job.id, drive.token, opening)


def _settle(drive: Drive, outcome: Outcome, corrective: bool) -> Result:
    noted = Measurement("outcome", outcome.kind.value)
    # "held": no command of this job ran outside a sandbox (perhaps none ran at all).
    isolation = Measurement("isolation", "unproven" if outcome.isolation_unproven else "held")
    if outcome.kind is OutcomeKind.dependency_request:
        assert outcome.dependency is not None
        _ask_for_dependency(drive, outcome.dependency)
    if outcome.kind is OutcomeKind.failed:
        raise StageFailed(
            outcome.diagnosis or "the agent failed without saying why", Evidence.of(noted)
        )
    tree = drive.worktree.content_id()
    changed = drive.worktree.changed_files(drive.job.baseline or "", tree)
    files = Measurement("files_changed", len(changed), Expect.at_least, 1)
    if changed:
        # Rule 9: a lost stream that left changes continues to verification in this same job.
        summary = drive.sanitizer.clean(outcome.summary, SUMMARY_LIMIT) if outcome.summary else None
        told = Measurement("agent_summary", summary)
        measured = [noted, files, told, isolation]
        if outcome.summary_repair is not None:
            # The reviewer sees whether the summary was asked for again, and any limit.
            repair = drive.sanitizer.clean(outcome.summary_repair, 200)
            measured.append(Measurement("summary_repair", repair))
        return Result(tree, Evidence.of(*measured))
    with drive.fenced() as conn:
        context.settle(conn, drive.job.id, drive.agent_name)
    if outcome.kind is OutcomeKind.interrupted:
        raise Retry(Evidence.of(noted, files))  # rule 9: nothing changed, a new attempt may start
    if not corrective and _is_first_job_in_room(drive):
        # Rule 7: an unchanged first job gets exactly one corrective run in the same context.
        with drive.fenced() as conn:
            context.post_note(conn, drive.job.id, drive.agent_name, CORRECTIVE_NOTE)
        raise Retry(Evidence.of(noted, files, Measurement("corrective_next", True)))
    why = "a second unchanged result" if corrective else "an unchanged workspace"
    raise StageFailed(
        f"the agent finished with {why}; nothing was delivered", Evidence.of(noted, files)
    )


def _corrective_is_due(drive: Drive) -> bool:
    """Whether the latest settled attempt of this stage (in this drive or before a crash)
    asked for the corrective run. Once one settled after it (the corrective run itself, a
    reviewer's reply turn) a later turn is a normal one again; an attempt that only lost the
    model's stream settled nothing, so the one before it still decides."""
    with drive.store.read() as conn:
        runs = stage_runs.for_job(conn, drive.job.id)
    attempts = [run_record(run) for run in runs if run.stage == Stage.running_agent]
    settled = [
        record
        for record in attempts
        if record is not None
        and record.evidence.get("outcome") is not None
        and record.evidence.get("outcome") != OutcomeKind.interrupted.value
    ]
    return bool(settled) and settled[-1].evidence.get("corrective_next") is True  # oldest first


def _is_first_job_in_room(drive: Drive) -> bool:
    with drive.store.read() as conn:
        return job_ledger.list_jobs(conn, drive.room.id)[0].id == drive.job.id


def _ask_for_dependency(drive: Drive, ask: DependencyAsk) -> None:
    """Record the agent's exact ask and pause at the dependency gate (or refuse it outright)."""
    problem = dependency_problem(ask, mask=drive.sanitizer.mask)
    if problem:
        raise StageFailed(f"the agent's dependency request was refused: {problem}")
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
    _await_decision(drive, ask.ecosystem, label(ask.ecosystem, ask.name, ask.version))


def _await_decision(drive: Drive, ecosystem: str, what: str) -> None:
    """Pause at the dependency gate, unless no decision could make the package installable.

    Then nobody is asked: the job is blocked with the reason, its request kept pending, and a
    resume after the repository is fixed (on a fresh baseline) puts it to a person.
    """
    blocked = missing_declarations(drive, ecosystem, what)
    if blocked is not None:
        raise blocked
    raise Pause(_GATE, Evidence.of(Measurement("outcome", "dependency_request")))


def _tell_dependency_decision(drive: Drive) -> None:
    """Before the turn: tell the agent, once, how its last dependency request was decided."""
    with drive.store.read() as conn:
        asked = dep_ledger.for_job(conn, drive.job.id)
        if not asked:
            return  # most jobs never ask for one
        told = context.load(conn, drive.job.id).told
        reasons = {d.id: d.reason for d in decisions.for_job(conn, drive.job.id)}
    if asked[-1].id in told:
        return
    latest = asked[-1]
    what = label(latest.ecosystem, latest.name, latest.version)
    if latest.status == RequestStatus.pending:
        _await_decision(drive, latest.ecosystem, what)  # asked before a crash or a block
    if latest.status == RequestStatus.approved:
        drive.move(Stage.installing_dependency)
        note = install_approved(drive, latest)
    else:
        reason = reasons.get(latest.decision_id or -1) or "no reason given"
        note = f"dependency {what} was rejected: {reason}"
    with drive.fenced() as conn:
        context.post_note(conn, drive.job.id, drive.agent_name, note, told=latest.id)
    drive.move(Stage.running_agent)


def _spec_id(spec: dict[str, Any]) -> str:
    # Specs may hold floats (a timeout), which the compact form refuses; and this identity sits
    # in every stored agent-stage recipe, so it keeps the spaced form it was first hashed in.
    return digest(spec, Form.spaced)


AGENT: StageDef[Drive] = StageDef(
    name=Stage.running_agent.value,
    run=_agent,
    inputs=lambda drive: {
        "request": drive.request.id,
        "agent": _spec_id(drive.request.agent),
        **follow_ups.agent_inputs(drive),  # a reply makes the agent (and all after it) run again
    },
    required=("files_changed",),
    content_now=lambda drive, prior: drive.worktree.content_id(),
    max_attempts=MAX_ATTEMPTS,
)
