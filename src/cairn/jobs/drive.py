"""Driving one claimed job: the run gate, then the code-job workflow on the stage engine."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from typing import Any

import sqlalchemy as sa

from cairn.config import Config
from cairn.engine import (
    NO_FAULTS,
    Engine,
    Evidence,
    Faults,
    RunRecord,
    StageDef,
    StageFailed,
    Workflow,
)
from cairn.errors import CairnError, LeaseLost
from cairn.jobs import context
from cairn.jobs.access import missing_access
from cairn.jobs.gates import waiting_actions
from cairn.jobs.ledger import EnteringLedger
from cairn.next_action import Action, NextAction
from cairn.sanitize import Sanitizer, user_sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store, workspace_hosts
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group
from cairn.store.records import Group, Job, Request, Room
from cairn.store.rooms import get_room
from cairn.workspace.askpass import GitCredential
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

_log = logging.getLogger("cairn.runner")
Handler = Callable[["Drive"], bool]
"""A gate before the workflow; True when the job is past it and goes on into the workflow now
(moved out of the gate by its first stage's intent, in one write)."""
ProgressCallback = Callable[[Job], None]


class Blocked(StageFailed):
    """A stage needs someone outside cairn (a dirty checkout, a refused push): not a failure."""

    def __init__(
        self,
        diagnosis: str,
        evidence: Evidence | None = None,
        *,
        next_actions: Iterable[NextAction] = (),
    ) -> None:
        super().__init__(diagnosis, evidence)
        self.next_actions = tuple(next_actions)


def room_credential(store: Store, config: Config, room: Room) -> GitCredential | None:
    """The git login of a room on a forge, from the runner's environment or the store."""
    from cairn.forges.credentials import room_git_credential

    key = config.secret_key.get_secret_value() if config.secret_key else None
    with store.read() as conn:
        # The variable's name is the room's setting, so it is read here, in the runner that
        # needs it, and never passed on: only cairn's own git calls get the token.
        return room_git_credential(room.scope, environ=os.environ, conn=conn, secret_key=key)


class Drive:
    """One runner's hold on one job: everything a stage needs, and every write fenced."""

    def __init__(
        self,
        store: Store,
        config: Config,
        job: Job,
        *,
        on_progress: ProgressCallback | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
        faults: Faults = NO_FAULTS,
    ) -> None:
        self.store = store
        self.config = config
        self.job = job
        self.token = job.fencing_token
        self.on_progress = on_progress or (lambda job: None)
        self.stop_requested = stop_requested
        self.faults = faults
        with store.read() as conn:
            self.request: Request = job_ledger.get_request(conn, job.request_id)
            self.room: Room = get_room(conn, job.room_id)
            self.group: Group = get_group(conn, self.room.group_id)
        self.agent_name = str(self.request.agent.get("adapter", "agent"))
        # The room's scope alone may let commands run unsandboxed where no sandbox can be had.
        self.allow_unsandboxed = bool(self.room.scope.get("unsandboxed_commands", False))
        self.sanitizer: Sanitizer = user_sanitizer(config, self.room.repo)
        self._reused_unchecked: str | None = None
        self._entering_stage: Stage | None = None
        self._outcome_fields: dict[str, Any] = {}
        self._holding: str | None = None
        """A host to record as the workspace's holder in the next move (`hold_with_next_move`)."""

    @cached_property
    def mirror(self) -> Mirror:
        path = self.config.mirror_path(self.store.installation_id, self.room.id)
        return Mirror(
            path,
            self.room.repo,
            self.room.base_branch,
            git_timeout=self.config.git_timeout,
            credential=room_credential(self.store, self.config, self.room),
        )

    @cached_property
    def branch(self) -> str:
        """The job's own branch, in the mirror and in the room's repository."""
        return self.job.branch_in(self.store.installation_id)

    @cached_property
    def commit_message(self) -> str:
        """The message of the commit that puts the job's result on its branch."""
        text = self.request.text.strip()
        return f"{self.branch}: {text.splitlines()[0][:72] if text else 'job'}"

    @cached_property
    def worktree(self) -> Worktree:
        path = self.config.workspace_path(self.store.installation_id, self.job.id)
        return Worktree(self.mirror, path, self.branch)

    @contextmanager
    def fenced(self) -> Iterator[sa.Connection]:
        """A transaction that commits only while this runner still holds the job."""
        with self.store.fenced(self.job.id, self.token) as conn:
            yield conn

    def move(self, stage: Stage, status: Status = Status.running, **fields: Any) -> None:
        """Move the job to `stage`; leaving `running` also gives up this runner's lease."""
        with self.store.begin() as conn:
            moved = self.move_in(conn, stage, status, **fields)
        self.moved(moved)

    def move_in(
        self, conn: sa.Connection, stage: Stage, status: Status = Status.running, **fields: Any
    ) -> Job:
        """The writes of a move in the caller's transaction; the job as moved, once it commits
        (then hand it to `moved`). The move is itself a fenced write: its compare-and-set names
        this runner's token, so it also guards whatever else the transaction writes."""
        moved = job_ledger.transition(
            conn, self.job, stage, status, fencing_token=self.token, **fields
        )
        if self.job.stage is Stage.running_agent and stage is not Stage.running_agent:
            # Whatever the agent's last turn ended with is settled by this very move.
            context.settle(conn, self.job.id, self.agent_name)
        if self._holding is not None:
            workspace_hosts.hold(conn, self.job.id, self._holding)
        return moved

    def moved(self, job: Job) -> None:
        """Take the job as a committed move left it, and show its progress."""
        self.job = job
        self._holding = None  # recorded by the move that just committed
        self.on_progress(job)

    def hold_with_next_move(self, host: str) -> None:
        """Make `host` the holder of the job's workspace in the job's next move, the write
        that moves a job past the run gate into the first stage it runs: a write saved, and
        still before that stage (or any after it) makes the workspace."""
        self._holding = host

    def take_entry(self) -> Stage | None:
        """The stage the workflow is entering but the job has not moved to yet (see
        `_entering`), now handed to whoever moves it; None when there is none."""
        entering, self._entering_stage = self._entering_stage, None
        return entering

    def record(self, **fields: Any) -> None:
        """Set job columns (baseline, summary, fingerprint) without moving the job, in the
        write that records the running stage's outcome (EnteringLedger): the job never names
        a baseline or a summary its stage did not finish with, and a commit is saved. For a
        stage with a recorded intent (every stage of the code-job workflow)."""
        self._outcome_fields |= fields

    def take_outcome_fields(self) -> dict[str, Any]:
        """The job columns `record` set since the last outcome, now handed to its write."""
        fields, self._outcome_fields = self._outcome_fields, {}
        return fields

    def record_in(self, conn: sa.Connection, fields: dict[str, Any]) -> Job:
        """The write of `fields` in the caller's transaction, fenced like a move; the job as
        it will be once that commits."""
        return job_ledger.transition(
            conn, self.job, self.job.stage, self.job.status, fencing_token=self.token, **fields
        )

    def stop(
        self,
        status: Status,
        diagnosis: str,
        stage: Stage | None = None,
        next_actions: Iterable[NextAction] = (),
    ) -> None:
        """End the drive in `status` (blocked or failed) with a bounded, masked diagnosis."""
        if stage is None:
            stage = Stage.failed if status is Status.failed else self.job.stage
        cleaned = self.sanitizer.clean(diagnosis)
        self.move(stage, status, diagnosis=cleaned, next_actions=tuple(next_actions))

    def wait(self, stage: Stage) -> None:
        """Leave the job waiting at the gate `stage`, with what a person can do about it."""
        steps = waiting_actions(stage, self.job.id, self.group.name)
        self.move(stage, Status.waiting, next_actions=steps)

    def resume_step(self) -> NextAction:
        """The next action that continues this job once its block is dealt with."""
        return NextAction(Action.resume, job=self.job.id)

    def refresh(self) -> Job:
        with self.store.read() as conn:
            self.job = job_ledger.get_job(conn, self.job.id)
        return self.job

    def run(self, gates: Mapping[Stage, Handler], workflow: Workflow[Drive]) -> Job:
        """Drive the job until it waits for a person, is blocked, ends, or is taken away.

        One job's error never stops the runner: the job is blocked with a diagnosis (masked,
        like every diagnosis) and the runner goes on to the next job.
        """
        try:
            if self._access_holds():
                while self._still_ours():
                    handler = gates.get(self.job.stage)
                    if handler is None or handler(self):
                        self._drive_workflow(workflow)
        except LeaseLost:
            pass
        except Blocked as blocked:
            self._halt(blocked.diagnosis, blocked.next_actions)
        except StageFailed as failed:
            with contextlib.suppress(LeaseLost):
                self.stop(Status.failed, failed.diagnosis)
        except CairnError as exc:
            self._halt(f"{exc}; fix the cause", [*exc.next_actions, self.resume_step()])
        except Exception:
            _log.exception("job %s stopped on an internal error", self.job.id)
            self._halt(
                "cairn hit an internal error while driving this job; the runner's log has the "
                "details. Fix the cause",
                [self.resume_step()],
            )
        return self.refresh()

    def _drive_workflow(self, workflow: Workflow[Drive]) -> None:
        """One pass of the workflow, its reuse decided from one snapshot taken now."""
        from cairn.jobs import checkpoints, rebuild

        # Before the snapshot's reuse is checked against the workspace: it must be this host's.
        rebuild.ensure_workspace_here(self)
        engine: Engine[Drive] = Engine.starting(
            EnteringLedger(self),
            faults=self.faults,
            on_start=self._entering,
            on_accept=self._accepted,
            on_reuse=self._reused,
        )
        report = engine.drive(workflow, self)
        self._checkpoint_reused()
        if report.paused_at == Stage.awaiting_dependency_approval.value:
            # The agent's turn ended on its ask: a settled position another host may go on from.
            checkpoints.save_if_changed(self, Stage.running_agent.value)
        if report.paused_at is not None:
            self.wait(Stage(report.paused_at))
        else:
            # Reached only once the change is merged: a delivery left to a person blocks.
            self.move(Stage.completed, Status.completed, diagnosis=None)

    def _accepted(self, stage: StageDef[Drive], run: RunRecord) -> None:
        from cairn.jobs import checkpoints

        if stage.name in checkpoints.CHANGING_STAGES:
            checkpoints.after_accepted(self, stage.name, run)

    def _reused(self, stage: StageDef[Drive], run: RunRecord) -> None:
        from cairn.jobs import checkpoints

        # A crash between an acceptance and its checkpoint leaves the stage reused here, its
        # checkpoint still missing: taken once the reused stages end (the workspace is theirs).
        if stage.name in checkpoints.CHANGING_STAGES:
            self._reused_unchecked = stage.name

    def _checkpoint_reused(self) -> None:
        from cairn.jobs import checkpoints

        if self._reused_unchecked is not None:
            stage, self._reused_unchecked = self._reused_unchecked, None
            checkpoints.save_if_changed(self, stage)

    def _entering(self, stage: StageDef[Drive]) -> None:
        self._checkpoint_reused()
        entered = Stage(stage.name)
        # A gate stage shows up only when it pauses: the job waits there, it never runs there.
        if self.job.stage is entered or entered is Stage.awaiting_review:
            return
        if stage.effect_free:
            self.move(entered)  # no intent is recorded for it to share a write with
        else:
            self._entering_stage = entered  # moved with the stage's intent (EnteringLedger)

    def _still_ours(self) -> bool:
        job = self.refresh()
        mine = job.status is Status.running and job.fencing_token == self.token
        return mine and not self.stop_requested()

    def _access_holds(self) -> bool:
        """Re-verified on every claim: the requester may still have the job worked on."""
        with self.store.read() as conn:
            lost = missing_access(conn, self.job, self.request)
        if lost:
            self.stop(Status.blocked, lost.diagnosis, next_actions=lost.next_actions)
        return lost is None

    def _halt(self, diagnosis: str, next_actions: Iterable[NextAction]) -> None:
        with contextlib.suppress(LeaseLost):
            self.stop(Status.blocked, diagnosis, next_actions=next_actions)
