"""Where stage runs are recorded, and the fixed snapshot of accepted runs that reuse reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

from cairn.engine.evidence import Evidence


class RunStatus(StrEnum):
    running = "running"
    """Intent recorded (the recipe), work under way."""
    accepted = "accepted"
    """Evidence passed: a checkpoint that later runs may reuse."""
    failed = "failed"
    """Evidence missing or short, or the stage failed: not done, may run again."""
    paused = "paused"
    """Waiting for a person (a gate); neither accepted nor failed."""
    abandoned = "abandoned"
    """Its process died while it ran."""


@dataclass(frozen=True)
class RunRecord:
    """One stage run as the ledger holds it, its evidence parsed (empty while none is recorded).

    A run whose stored fields cannot be read is no record at all (see `read_record`).
    """

    stage: str
    attempt: int
    recipe_id: str
    content_id: str | None
    evidence: Evidence
    status: RunStatus
    ref: Any = None
    """The ledger's own handle for the run (a row id), for finishing it or marking it reused."""


class Ledger(Protocol):
    """The execution ledger a workflow records into (cairn's store, a file, memory)."""

    def runs(self) -> Iterable[Mapping[str, Any]]:
        """Every recorded run, oldest first, as raw fields (stage, attempt, recipe_id, ...)."""
        ...

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        """Record the intent to run `stage` with this recipe; returns the run, `running`."""
        ...

    def finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        """Record what the run produced and whether it was accepted."""
        ...

    def record(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        """Record an effect-free stage's recipe and outcome at once, in one write, all or none."""
        ...

    def mark_reused(self, records: Sequence[RunRecord]) -> None:
        """Record that a later drive took these accepted runs from its snapshot: all, or none."""
        ...


class Snapshot:
    """The accepted runs as they stood when a process started: read once, never refreshed."""

    def __init__(self, accepted: Mapping[str, RunRecord]) -> None:
        self._accepted = MappingProxyType(dict(accepted))

    @classmethod
    def take(cls, ledger: Ledger) -> Snapshot:
        """Read the ledger once; an unreadable record counts as missing ("run it again")."""
        latest: dict[str, RunRecord] = {}
        for raw in ledger.runs():
            record = read_record(raw)
            if record is not None and record.status is RunStatus.accepted:
                latest[record.stage] = record  # runs come oldest first: the last one wins
        return cls(latest)

    def accepted(self, stage: str) -> RunRecord | None:
        return self._accepted.get(stage)

    def __len__(self) -> int:
        return len(self._accepted)


def read_record(raw: Mapping[str, Any]) -> RunRecord | None:
    """A record from stored fields, or None when any of them cannot be trusted."""
    try:
        evidence_data = raw.get("evidence")
        evidence = Evidence.from_data(evidence_data) if evidence_data is not None else Evidence()
        record = RunRecord(
            stage=str(raw["stage"]),
            attempt=int(raw["attempt"]),
            recipe_id=str(raw["recipe_id"]),
            content_id=raw.get("content_id"),
            evidence=evidence,
            status=RunStatus(raw["status"]),
            ref=raw.get("id"),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if record.status is RunStatus.accepted and (evidence_data is None or not record.content_id):
        return None  # an accepted run without its evidence or content cannot justify reuse
    return record


class MemoryLedger:
    """A ledger in memory: for tests and throwaway workflows."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def runs(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self.rows]

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        return self._append(stage, recipe_id, RunStatus.running, None, Evidence(), None)

    def finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        self.rows[run.ref] |= {
            "status": status.value,
            "content_id": content_id,
            "evidence": evidence.to_data(),
        }

    def record(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        return self._append(stage, recipe_id, status, content_id, evidence, evidence.to_data())

    def _append(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
        stored_evidence: Any,
    ) -> RunRecord:
        attempt = 1 + sum(1 for row in self.rows if row["stage"] == stage)
        self.rows.append(
            {
                "id": len(self.rows),
                "stage": stage,
                "attempt": attempt,
                "recipe_id": recipe_id,
                "content_id": content_id,
                "evidence": stored_evidence,
                "status": status.value,
            }
        )
        return RunRecord(
            stage, attempt, recipe_id, content_id, evidence, status, ref=len(self.rows) - 1
        )

    def mark_reused(self, records: Sequence[RunRecord]) -> None:
        for record in records:
            self.rows[record.ref]["reused"] = self.rows[record.ref].get("reused", 0) + 1
