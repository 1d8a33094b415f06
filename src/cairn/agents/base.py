"""What every agent adapter is: one turn in a workspace, one outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Turn:
    """Everything an adapter may use for one turn; `save_state` persists the job's own context."""

    job_id: int
    workspace: Path
    request: str
    state: dict[str, Any] | None
    save_state: Callable[[dict[str, Any]], None]
    notes: tuple[str, ...] = field(default=())
    """Messages from cairn for this turn (an approved dependency, a corrective run...)."""


class Agent(Protocol):
    """An agent adapter: runs one turn in a workspace and reports one outcome."""

    name: str

    def run_turn(self, turn: Turn) -> Outcome: ...
