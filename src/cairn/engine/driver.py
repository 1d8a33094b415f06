"""Driving a workflow: reuse what the snapshot proves, run the rest, accept only with evidence."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from cairn.engine.evidence import Evidence
from cairn.engine.faults import NO_FAULTS, Faults
from cairn.engine.identity import UpstreamContents, recipe_id
from cairn.engine.ledger import Ledger, RunRecord, RunStatus, Snapshot
from cairn.engine.workflow import (
    C,
    EvidenceShort,
    Pause,
    Result,
    Retry,
    StageDef,
    StageFailed,
    Upstream,
    Workflow,
)


def stage_recipe(
    stage: StageDef[C], ctx: C, upstream: Mapping[str, str | None] | UpstreamContents
) -> str:
    """The recipe identity the driver records for `stage`, given the contents before it."""
    return recipe_id(
        stage.name,
        stage.inputs(ctx),
        upstream=upstream,
        settings=stage.settings(ctx),
        tools=stage.tools,
    )


@dataclass
class Report:
    """What one drive did: which stages it reused, which it ran, where it stopped."""

    reused: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    paused_at: str | None = None
    """The gate the workflow waits at; None when every stage was accepted or reused."""
    contents: dict[str, str | None] = field(default_factory=dict)


@dataclass
class Engine(Generic[C]):
    """Drives workflows against one ledger, from one fixed snapshot per process."""

    ledger: Ledger
    snapshot: Snapshot
    faults: Faults = field(default_factory=lambda: NO_FAULTS)
    on_start: Callable[[StageDef[C]], None] = field(default=lambda stage: None)
    on_reuse: Callable[[StageDef[C], RunRecord], None] = field(default=lambda stage, run: None)
    on_accept: Callable[[StageDef[C], RunRecord], None] = field(default=lambda stage, run: None)
    """Called once a stage's result is durably accepted (where a caller checkpoints it)."""

    @classmethod
    def starting(cls, ledger: Ledger, **options: Any) -> Engine[C]:
        """An engine whose reuse decisions all read the ledger as it is now, once."""
        return cls(ledger, Snapshot.take(ledger), **options)

    def drive(self, workflow: Workflow[C], ctx: C) -> Report:
        """Walk the stages in order; raises StageFailed when one fails, returns when done/paused."""
        report = Report()
        accepted: dict[str, RunRecord] = {}
        # Reused runs not yet marked: marked together, in one write, before the next stage
        # runs or the drive returns (a crash first leaves them unmarked, to be reused again).
        reused: list[RunRecord] = []
        upstream_contents = UpstreamContents()  # report.contents, kept encoded
        for stage in workflow.stages:
            recipe = stage_recipe(stage, ctx, upstream_contents)
            run = self._reusable(stage, ctx, recipe)
            if run is not None:
                self.faults.point("before_reuse", stage.name)
                reused.append(run)
                self.on_reuse(stage, run)
                report.reused.append(stage.name)
            else:
                self._mark_reused(reused)
                # Every earlier stage was accepted or reused by now, so every need is here.
                upstream = Upstream(stage.name, {need: accepted[need] for need in stage.needs})
                try:
                    run = self._run(stage, ctx, recipe, upstream)
                except Pause as pause:
                    report.paused_at = pause.gate
                    return report
                report.ran.append(stage.name)
            accepted[stage.name] = run
            report.contents[stage.name] = run.content_id
            upstream_contents.add(stage.name, run.content_id)
        self._mark_reused(reused)
        return report

    def _mark_reused(self, reused: list[RunRecord]) -> None:
        if reused:
            self.ledger.mark_reused(tuple(reused))
            self.faults.point("after_reuse", reused[-1].stage)
            reused.clear()

    def _reusable(self, stage: StageDef[C], ctx: C, recipe: str) -> RunRecord | None:
        """The snapshot's accepted run if its recipe matches and its content still does."""
        prior = self.snapshot.accepted(stage.name)
        if prior is None or prior.recipe_id != recipe or stage.content_now is None:
            return None
        # Recomputed from the content as it is now: an equal-sized replacement is stale.
        return prior if stage.content_now(ctx, prior) == prior.content_id else None

    def _run(self, stage: StageDef[C], ctx: C, recipe: str, upstream: Upstream) -> RunRecord:
        """Run the stage until one attempt is accepted; the accepted run as recorded."""
        for attempt in range(1, stage.max_attempts + 1):
            self.on_start(stage)
            intent = None if stage.effect_free else self._intend(stage, recipe)
            try:
                result = stage.run(ctx, upstream)
            except Pause as pause:
                self._record(stage, recipe, intent, RunStatus.paused, None, pause.evidence)
                raise
            except Retry as retry:
                self._record(stage, recipe, intent, RunStatus.failed, None, retry.evidence)
                if attempt < stage.max_attempts:
                    continue
                raise StageFailed(
                    f"{stage.name} was tried {attempt} times without a result"
                ) from None
            except StageFailed as failed:
                self._record(stage, recipe, intent, RunStatus.failed, None, failed.evidence)
                raise
            return self._accept(stage, recipe, intent, result)
        raise AssertionError("unreachable")  # pragma: no cover

    def _intend(self, stage: StageDef[C], recipe: str) -> RunRecord:
        """Record the recipe, durably, before a stage that may act outside starts its work."""
        run = self.ledger.start(stage.name, recipe)
        self.faults.point("after_start", stage.name)
        return run

    def _record(
        self,
        stage: StageDef[C],
        recipe: str,
        intent: RunRecord | None,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        """The outcome recorded on the intent, or with the recipe in one write (effect-free)."""
        if intent is None:
            return self.ledger.record(stage.name, recipe, status, content_id, evidence)
        self.ledger.finish(intent, status, content_id, evidence)
        return dataclasses.replace(intent, status=status, content_id=content_id, evidence=evidence)

    def _accept(
        self, stage: StageDef[C], recipe: str, intent: RunRecord | None, result: Result
    ) -> RunRecord:
        self.faults.point("before_accept", stage.name)
        shortfalls = result.evidence.shortfalls(stage.required)
        if shortfalls:
            self._record(
                stage, recipe, intent, RunStatus.failed, result.content_id, result.evidence
            )
            raise EvidenceShort(
                f"{stage.name} was not accepted: {'; '.join(shortfalls)}", result.evidence
            )
        run = self._record(
            stage, recipe, intent, RunStatus.accepted, result.content_id, result.evidence
        )
        self.faults.point("after_accept", stage.name)
        self.on_accept(stage, run)
        return run
