"""Driving one claimed job: stage handlers, fenced writes, stage-run records."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import sqlalchemy as sa

from cairn.config import Config
from cairn.errors import LeaseLost
from cairn.jobs.identity import recipe_id
from cairn.sanitize import Sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store, stage_runs
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_group, get_user
from cairn.store.records import Group, Job, Request, Room, User
from cairn.store.rooms import get_room
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

Handler = Callable[["Drive"], None]
ProgressCallback = Callable[[Job], None]


class Drive:
    """One runner's hold on one job: everything a stage handler needs, and every write fenced."""

    def __init__(
        self,
        store: Store,
        config: Config,
        job: Job,
        *,
        sanitizer: Sanitizer,
        on_progress: ProgressCallback | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.config = config
        self.job = job
        self.token = job.fencing_token
        self.sanitizer = sanitizer
        self.on_progress = on_progress or (lambda job: None)
        self.stop_requested = stop_requested
        with store.begin() as conn:
            self.request: Request = job_ledger.get_request(conn, job.request_id)
            self.room: Room = get_room(conn, job.room_id)
            self.group: Group = get_group(conn, self.room.group_id)
            self.requester: User = get_user(conn, self.request.requester_id)

    @cached_property
    def mirror(self) -> Mirror:
        path = self.config.mirrors_dir / f"room-{self.room.id}.git"
        return Mirror(path, self.room.repo, self.room.base_branch)

    @cached_property
    def worktree(self) -> Worktree:
        return Worktree(
            self.mirror, self.config.workspaces_dir / f"job-{self.job.id}", self.job.branch
        )

    @contextmanager
    def fenced(self) -> Iterator[sa.Connection]:
        """A transaction that commits only while this runner still holds the job."""
        with self.store.fenced(self.job.id, self.token) as conn:
            yield conn

    def move(self, stage: Stage, status: Status = Status.running, **fields: Any) -> None:
        """Move the job to `stage`; leaving `running` also gives up this runner's lease."""
        with self.fenced() as conn:
            self.job = job_ledger.transition(conn, self.job, stage, status, **fields)
        self.on_progress(self.job)

    def stop(self, status: Status, diagnosis: str, stage: Stage | None = None) -> None:
        """End the drive in `status` (blocked or failed) with a bounded, masked diagnosis."""
        if stage is None:
            stage = Stage.failed if status is Status.failed else self.job.stage
        self.move(stage, status, diagnosis=self.sanitizer.clean(diagnosis))

    def attempt(self, stage: Stage, inputs: dict[str, Any]) -> StageAttempt:
        """Record the intent to run `stage` with these inputs, before any of its work."""
        with self.fenced() as conn:
            run = stage_runs.start(
                conn, self.job.id, stage.value, recipe_id(stage, inputs), self.token
            )
        return StageAttempt(self, run.id)

    def refresh(self) -> Job:
        with self.store.begin() as conn:
            self.job = job_ledger.get_job(conn, self.job.id)
        return self.job

    def run(self, handlers: dict[Stage, Handler]) -> Job:
        """Run handlers until the job reaches a gate, a block or an end (or is taken away)."""
        try:
            while self.refresh().status is Status.running and self.job.fencing_token == self.token:
                if self.stop_requested():
                    break
                handlers[self.job.stage](self)
        except LeaseLost:
            pass
        return self.refresh()


@dataclass
class StageAttempt:
    """An open stage run: accepted only with evidence, or failed with it."""

    drive: Drive
    run_id: int

    def accept(self, content_id: str | None, evidence: dict[str, Any]) -> None:
        self._finish("accepted", content_id, evidence)

    def reject(self, content_id: str | None, evidence: dict[str, Any]) -> None:
        self._finish("failed", content_id, evidence)

    def pause(self, evidence: dict[str, Any]) -> None:
        """Neither accepted nor failed: the stage waits for a person (a gate) to go on."""
        self._finish("paused", None, evidence)

    def _finish(self, status: str, content_id: str | None, evidence: dict[str, Any]) -> None:
        with self.drive.fenced() as conn:
            stage_runs.finish(
                conn, self.run_id, status=status, content_id=content_id, evidence=evidence
            )
