"""Workflows: ordered stages with stable names, each declaring inputs, a run and its evidence."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
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


class Upstream(Mapping[str, RunRecord]):
    """The accepted runs a stage declared in its `needs`, by stage name, evidence parsed.

    Each was accepted earlier in the same drive, or reused from the drive's snapshot (for a
    resumed job: accepted by an earlier process). A stage reads its inputs from here, never
    from the ledger behind the engine's back.
    """

    def __init__(self, stage: str, runs: Mapping[str, RunRecord]) -> None:
        self._stage = stage
        self._runs = MappingProxyType(dict(runs))

    def __getitem__(self, name: str) -> RunRecord:
        try:
            return self._runs[name]
        except KeyError:
            raise KeyError(f"stage {self._stage} does not declare {name} in its needs") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)


@dataclass(frozen=True)
class StageDef(Generic[C]):
    """One stage: a stable name, what its recipe is made of, how to run it, what proves it."""

    name: str
    run: Callable[[C, Upstream], Result]
    inputs: Callable[[C], Mapping[str, Any]] = field(default=lambda ctx: {})
    settings: Callable[[C], Mapping[str, Any]] = field(default=lambda ctx: {})
    tools: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    """Evidence that must be present (and hold) for a result to be accepted."""
    content_now: Callable[[C, RunRecord], str | None] | None = None
    """The content identity recomputed from the world as it is now; None: never reused."""
    max_attempts: int = 1
    """How many times one drive may run the stage when it raises Retry."""
    effect_free: bool = False
    """True only when `run` changes nothing outside the process that runs it: no file, no
    workspace, no process, no call that acts elsewhere, no effect, no write to any ledger.

    Such a stage leaves no trace for a resume to reconcile if its runner dies while it runs,
    so its recipe and its outcome are recorded together, in one write, once `run` returned
    (a crash before that write means the stage simply runs again). Every other stage has its
    recipe recorded durably before `run` starts, so a cut-off attempt is always known.
    """
    needs: tuple[str, ...] = ()
    """Earlier stages whose accepted runs `run` reads, handed to it as its `Upstream`.

    Only what `run` reads: the recipe names the content of every earlier stage regardless.
    """


@dataclass(frozen=True)
class Workflow(Generic[C]):
    """Stages in order: each runs only after every stage before it was accepted or reused."""

    name: str
    stages: tuple[StageDef[C], ...]

    def __post_init__(self) -> None:
        names = [stage.name for stage in self.stages]
        if len(names) != len(set(names)):
            raise ValueError(f"workflow {self.name} repeats a stage name: {names}")
        earlier: set[str] = set()
        for stage in self.stages:
            unmet = [need for need in stage.needs if need not in earlier]
            if unmet:
                raise ValueError(
                    f"stage {stage.name} of workflow {self.name} needs {', '.join(unmet)}, "
                    "which must be stages before it"
                )
            earlier.add(stage.name)
