"""The engine's ledgers in cairn's store: stage_runs and effects of one job, every write fenced."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cairn.engine import EffectState, EffectStatus, Evidence, RunRecord, RunStatus, read_record
from cairn.store import Store, effects, fenced_runs, stage_runs
from cairn.store.records import StageRun

if TYPE_CHECKING:
    from cairn.jobs.drive import Drive


def run_record(run: StageRun) -> RunRecord | None:
    """The engine's reading of a stored stage run, evidence parsed; None when it is unreadable."""
    return read_record(_fields(run))


def _fields(run: StageRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "stage": run.stage,
        "attempt": run.attempt,
        "recipe_id": run.recipe_id,
        "content_id": run.content_id,
        "evidence": run.evidence,
        "status": run.status,
    }


class StoreLedger:
    """A job's stage runs, written only while `fencing_token` is the job's current token."""

    def __init__(self, store: Store, job_id: int, fencing_token: int) -> None:
        self.store, self.job_id, self.token = store, job_id, fencing_token
        self._running: set[str] | None = None
        """Stages with an attempt that may be left `running`: those `runs()` read so (after
        the claim: a runner that could start another is fenced out since), and those this
        ledger started and has not finished. None until `runs()` was read: every write of
        a stage then looks for one to abandon."""
        self._latest: dict[str, int] = {}
        """The attempt of each stage this ledger started last: only its outcome settles the
        stage (an older attempt's does not speak for a newer one)."""

    def runs(self) -> Iterator[dict[str, Any]]:
        with self.store.read() as conn:
            rows = stage_runs.for_job(conn, self.job_id)
        self._running = {run.stage for run in rows if run.status == RunStatus.running}
        for run in rows:
            yield _fields(run)

    def _may_be_running(self, stage: str) -> bool:
        """Whether a write of `stage` must look for an attempt to abandon; from now on, also
        this ledger's own (noted before its write: it may land though the call fails)."""
        if self._running is None:
            return True
        found = stage in self._running
        self._running.add(stage)
        return found

    def _settled(self, stage: str) -> None:
        """No attempt of `stage` is left running (an outcome was just recorded for it)."""
        self._latest.pop(stage, None)
        if self._running is not None:
            self._running.discard(stage)

    def _started(self, run: RunRecord) -> RunRecord:
        self._latest[run.stage] = run.ref
        return run

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        abandon = self._may_be_running(stage)
        started = run_record(
            fenced_runs.start(
                self.store, self.job_id, self.token, stage, recipe_id, abandon=abandon
            )
        )
        assert started is not None, "a run just recorded reads back"
        return self._started(started)

    def finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        self._finish(run, status, content_id, evidence)
        if status is RunStatus.running:
            self._may_be_running(run.stage)  # running again: looked for from now on
        elif self._latest.get(run.stage) == run.ref:
            self._settled(run.stage)

    def _finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        fenced_runs.finish(
            self.store,
            self.job_id,
            self.token,
            run.ref,
            status=status,
            content_id=content_id,
            evidence=evidence.to_data(),
        )

    def record(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        abandon = self._may_be_running(stage)
        run = fenced_runs.record(
            self.store,
            self.job_id,
            self.token,
            stage,
            recipe_id,
            status=status,
            content_id=content_id,
            evidence=evidence.to_data(),
            abandon=abandon,
        )
        self._settled(stage)
        recorded = run_record(run)
        assert recorded is not None, "a run just recorded reads back"
        return recorded

    def mark_reused(self, records: Sequence[RunRecord]) -> None:
        with self.store.fenced(self.job_id, self.token) as conn:
            stage_runs.mark_reused(conn, self.job_id, [record.ref for record in records])


class EnteringLedger(StoreLedger):
    """A drive's stage runs, each stage's intent recorded in the very transaction that moves
    the job into that stage: one fenced write where a move and an intent took two (the move's
    compare-and-set on the fencing token guards the intent too). Likewise the job columns a
    stage set (`Drive.record`) are written with that stage's outcome."""

    def __init__(self, drive: Drive) -> None:
        super().__init__(drive.store, drive.job.id, drive.token)
        self.drive = drive

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        entering = self.drive.take_entry()
        if entering is None:  # another attempt of the stage the job is in already
            return super().start(stage, recipe_id)
        abandon = self._may_be_running(stage)
        with self.store.begin() as conn:
            moved = self.drive.move_in(conn, entering)
            run = fenced_runs.start_in(
                conn, self.job_id, self.token, stage, recipe_id, abandon=abandon
            )
        self.drive.moved(moved)
        started = run_record(run)
        assert started is not None, "a run just recorded reads back"
        return self._started(started)

    def record(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        unwritten = self.drive.take_outcome_fields()
        assert not unwritten, f"an effect-free stage set job columns: {sorted(unwritten)}"
        return super().record(stage, recipe_id, status, content_id, evidence)

    def _finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        fields = self.drive.take_outcome_fields()
        if not fields:
            return super()._finish(run, status, content_id, evidence)
        with self.store.begin() as conn:
            recorded = self.drive.record_in(conn, fields)  # the fence of the whole write
            stage_runs.finish(
                conn, run.ref, status=status, content_id=content_id, evidence=evidence.to_data()
            )
        self.drive.job = recorded


class StoreEffects:
    """A job's effects, written only while `fencing_token` is the job's current token."""

    def __init__(self, store: Store, job_id: int, fencing_token: int) -> None:
        self.store, self.job_id, self.token = store, job_id, fencing_token

    def begin(self, kind: str, key: str) -> EffectState:
        with self.store.fenced(self.job_id, self.token) as conn:
            effect = effects.begin(conn, self.job_id, kind, key)
        return EffectState(effect.status, effect.external_ref)

    def done(
        self, key: str, external_ref: str | None, status: EffectStatus = EffectStatus.done
    ) -> None:
        with self.store.fenced(self.job_id, self.token) as conn:
            effects.mark(conn, key, status, external_ref)
