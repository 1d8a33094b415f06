"""What every agent adapter is: one turn in a workspace, one outcome."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cairn.store.records import ContextStep, StepKind


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
class Usage:
    """What one turn cost: model requests, tokens as the model reported them, model time.

    The script agent calls no model: its usage is all zeros. The runner measures the turn's
    wall-clock time itself; `seconds` is the time the adapter spent waiting for its model.
    """

    model_requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.model_requests + other.model_requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.seconds + other.seconds,
        )

    @classmethod
    def from_data(cls, data: object) -> Usage:
        """The usage a stored outcome carries; zeros for one stored before usage existed."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            int(data.get("model_requests", 0)),
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            float(data.get("seconds", 0.0)),
        )


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    summary: str | None = None
    diagnosis: str | None = None
    dependency: DependencyAsk | None = None
    isolation_unproven: bool = False
    """A command of this job ran without a sandbox (the room's scope allowed it)."""
    usage: Usage = Usage()
    """What the turn cost in model requests and tokens (zeros for the script agent)."""
    summary_repair: str | None = None
    """Set when the summary was asked for again with only `finish` offered: "repaired", or
    the limit ("limit: ...") that kept the repair from giving a summary proven side-effect free."""

    def to_data(self) -> dict[str, Any]:
        """A JSON-ready form, stored with the agent's last save of a turn."""
        return {
            "kind": self.kind.value,
            "summary": self.summary,
            "diagnosis": self.diagnosis,
            "dependency": asdict(self.dependency) if self.dependency else None,
            "isolation_unproven": self.isolation_unproven,
            "usage": asdict(self.usage),
            "summary_repair": self.summary_repair,
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
            usage=Usage.from_data(data.get("usage")),
            summary_repair=data.get("summary_repair"),
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


class Conversation(Protocol):
    """The job's own conversation, append-only, saved under the job's fenced lease (rule 1).

    Keyed by the job alone: an adapter can reach no other job's steps through it. Each call
    is its own fenced transaction; a runner that lost the job is refused with `LeaseLost`.
    """

    def steps(self) -> list[ContextStep]:
        """Every saved step of this job's conversation, in order; empty for a fresh one."""
        ...

    def append(self, kind: StepKind, payload: Mapping[str, Any]) -> ContextStep:
        """Save the next step (a model answer, a tool result...) before acting on it."""
        ...

    def restart(self, opening: Sequence[tuple[StepKind, Mapping[str, Any]]]) -> list[ContextStep]:
        """Drop the conversation and start it afresh with `opening` (rule 1, `reply --fresh`)."""
        ...


@dataclass(frozen=True)
class JobFacts:
    """What an adapter may tell its model about the job and its room (all already masked)."""

    kind: str = "interactive"
    """interactive, or scheduled (rule 8: a fresh context from the repository every run)."""
    room: str = ""
    base_branch: str = "main"
    verify_command: str | None = None
    references: str | None = None
    """Rule 8: a scheduled job's bounded reference set (repository documents, the previous
    scheduled run's summary and diffstat), built by cairn; None for other jobs."""


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
    conversation: Conversation | None = None
    """The job's append-only conversation (model adapters); the script agent uses `state`."""
    follow_ups: tuple[str, ...] = field(default=())
    """A reviewer's messages (`cairn reply`), masked, to add to the conversation this turn."""
    fresh_opening: str | None = None
    """`cairn reply --fresh`: start a new conversation holding this text (the request, the
    reviewer's message and the current diff) instead of continuing the old one."""
    facts: JobFacts = field(default_factory=JobFacts)
    mask: Callable[[str], str] = field(default=lambda text: text)
    """Masks secrets (environment values, keys) out of any text before the adapter stores it."""
    installation_id: str = ""
    """The store's installation id: with the job id it names the job's own CLI session."""
    agent_home: Path | None = None
    """The job's private state folder for a CLI agent (its config and session files), outside
    the workspace and every other job's; None where the runner gives none."""


class Agent(Protocol):
    """An agent adapter: runs one turn in a workspace and reports one outcome."""

    name: str

    def run_turn(self, turn: Turn) -> Outcome: ...
