"""What every agent adapter is: one turn in a workspace, one outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol


class OutcomeKind(StrEnum):
    changed = "changed"
    """The agent finished its turn believing it changed the workspace."""
    dependency_request = "dependency_request"
    """The agent needs one exact package version approved before it can go on."""
    failed = "failed"
    """The agent gave up; the outcome carries a diagnosis."""
    no_change = "no_change"
    """The agent finished without changing anything."""
    interrupted = "interrupted"
    """The agent stopped answering (a lost stream); the workspace decides what happens next."""


@dataclass(frozen=True)
class DependencyAsk:
    ecosystem: str
    name: str
    version: str
    reason: str


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    summary: str | None = None
    diagnosis: str | None = None
    dependency: DependencyAsk | None = None
    isolation_unproven: bool = False
    """A command of this job ran without a sandbox (the room's scope allowed it)."""

    def to_data(self) -> dict[str, Any]:
        """A JSON-ready form, stored with the agent's last save of a turn."""
        return {
            "kind": self.kind.value,
            "summary": self.summary,
            "diagnosis": self.diagnosis,
            "dependency": asdict(self.dependency) if self.dependency else None,
            "isolation_unproven": self.isolation_unproven,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Outcome:
        ask = data.get("dependency")
        return cls(
            OutcomeKind(data["kind"]),
            summary=data.get("summary"),
            diagnosis=data.get("diagnosis"),
            dependency=DependencyAsk(**ask) if ask else None,
            isolation_unproven=bool(data.get("isolation_unproven", False)),
        )

    def masked(self, mask: Callable[[str], str]) -> Outcome:
        """The same outcome with every free text passed through `mask` (before it is stored)."""
        ask = self.dependency
        return replace(
            self,
            summary=None if self.summary is None else mask(self.summary),
            diagnosis=None if self.diagnosis is None else mask(self.diagnosis),
            dependency=None if ask is None else replace(ask, reason=mask(ask.reason)),
        )


class SaveState(Protocol):
    def __call__(self, state: dict[str, Any], outcome: Outcome | None = None) -> None:
        """Persist the job's context; the turn's last save also carries its outcome.

        Saving the outcome with the state that moved past the step that produced it means a
        crash before cairn records the outcome cannot lose it: the next turn reports it again.
        """


@dataclass(frozen=True)
class Turn:
    """Everything an adapter may use for one turn; `save_state` persists the job's own context."""

    job_id: int
    workspace: Path
    request: str
    state: dict[str, Any] | None
    save_state: SaveState
    workspace_id: Callable[[], str]
    """The workspace's content identity now (a git tree id), to tell whether a step changed it."""
    notes: tuple[str, ...] = field(default=())
    """Messages from cairn for this turn (an approved dependency, a corrective run...)."""
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    """True once the runner lost the job: a long step should stop at once."""
    allow_unsandboxed: bool = False
    """The room's scope lets commands run without a sandbox where none can be had."""
    hidden_paths: tuple[Path, ...] = field(default=())
    """Folders commands must not see (cairn's home), apart from the workspace itself."""


class Agent(Protocol):
    """An agent adapter: runs one turn in a workspace and reports one outcome."""

    name: str

    def run_turn(self, turn: Turn) -> Outcome: ...
