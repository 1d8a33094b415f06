"""Workflows: ordered stages with stable names, each declaring inputs, a run and its evidence."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cairn.engine.evidence import Evidence
from cairn.engine.ledger import RunRecord
from cairn.errors import CairnError

C = TypeVar("C")


@dataclass(frozen=True)
class Result:
    """What a stage produced: the identity of its content and the evidence measured on it."""

    content_id: str
    evidence: Evidence


class Pause(Exception):
    """Raised by a stage that must wait for a person (a gate); the workflow stops there."""

    def __init__(self, gate: str, evidence: Evidence | None = None) -> None:
        super().__init__(gate)
        self.gate = gate
        self.evidence = evidence or Evidence()


class Retry(Exception):
    """Raised by a stage whose attempt is not done but may be tried again at once."""

    def __init__(self, evidence: Evidence) -> None:
        super().__init__("retry")
        self.evidence = evidence


class StageFailed(CairnError):
    """A stage failed for a reason a person should read; the workflow ends there."""

    def __init__(self, diagnosis: str, evidence: Evidence | None = None) -> None:
        super().__init__(diagnosis)
        self.diagnosis = diagnosis
        self.evidence = evidence or Evidence()


class EvidenceShort(StageFailed):
    """A result whose evidence is missing or short: never accepted."""


@dataclass(frozen=True)
class StageDef(Generic[C]):
    """One stage: a stable name, what its recipe is made of, how to run it, what proves it."""

    name: str
    run: Callable[[C], Result]
    inputs: Callable[[C], Mapping[str, Any]] = field(default=lambda ctx: {})
    settings: Callable[[C], Mapping[str, Any]] = field(default=lambda ctx: {})
    tools: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    """Evidence that must be present (and hold) for a result to be accepted."""
    content_now: Callable[[C, RunRecord], str | None] | None = None
    """The content identity recomputed from the world as it is now; None: never reused."""
    max_attempts: int = 1
    """How many times one drive may run the stage when it raises Retry."""


@dataclass(frozen=True)
class Workflow(Generic[C]):
    name: str
    stages: tuple[StageDef[C], ...]

    def __post_init__(self) -> None:
        names = [stage.name for stage in self.stages]
        if len(names) != len(set(names)):
            raise ValueError(f"workflow {self.name} repeats a stage name: {names}")
