"""The engine's ledgers for a code job: stage_runs and effects, every write fenced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from cairn.engine import EffectState, Evidence, RunRecord, RunStatus
from cairn.store import effects, stage_runs

if TYPE_CHECKING:
    from cairn.jobs.drive import Drive


class StoreLedger:
    """The job's stage runs, recorded under the runner's fencing token."""

    def __init__(self, drive: Drive) -> None:
        self.drive = drive

    def runs(self) -> Iterator[dict[str, Any]]:
        with self.drive.store.begin() as conn:
            rows = stage_runs.for_job(conn, self.drive.job.id)
        for run in rows:
            yield {
                "id": run.id,
                "stage": run.stage,
                "attempt": run.attempt,
                "recipe_id": run.recipe_id,
                "content_id": run.content_id,
                "evidence": run.evidence,
                "status": run.status,
            }

    def start(self, stage: str, recipe_id: str) -> int:
        with self.drive.fenced() as conn:
            return stage_runs.start(conn, self.drive.job.id, stage, recipe_id, self.drive.token).id

    def finish(
        self, run: int, status: RunStatus, content_id: str | None, evidence: Evidence | None
    ) -> None:
        data = evidence.to_data() if evidence is not None else None
        with self.drive.fenced() as conn:
            stage_runs.finish(conn, run, status=status.value, content_id=content_id, evidence=data)

    def mark_reused(self, record: RunRecord) -> None:
        with self.drive.fenced() as conn:
            stage_runs.mark_reused(conn, record.ref)


class StoreEffects:
    """The job's effects, recorded under the runner's fencing token."""

    def __init__(self, drive: Drive) -> None:
        self.drive = drive

    def begin(self, kind: str, key: str) -> EffectState:
        with self.drive.fenced() as conn:
            effect = effects.begin(conn, self.drive.job.id, kind, key)
        return EffectState(effect.status, effect.external_ref)

    def done(self, key: str, external_ref: str | None, status: str = effects.DONE) -> None:
        with self.drive.fenced() as conn:
            effects.mark(conn, key, status, external_ref)
