"""Frozen records read from the ledgers: `from_row()` builds one, `evolve()` copies it."""

from __future__ import annotations

import dataclasses
import functools
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from cairn.engine.effects import EffectStatus
from cairn.engine.ledger import RunStatus
from cairn.next_action import NextAction
from cairn.stages import Gate, Stage, Status, Verdict


class Record:
    @classmethod
    def from_row(cls, row: Any) -> Self:
        names = _field_names(cls)  # type: ignore[arg-type]
        return cls(**{k: v for k, v in row._mapping.items() if k in names})

    def evolve(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@functools.cache
def _field_names(record: type[Record]) -> frozenset[str]:
    """The fields of a record class, looked up once (a runner builds records all day)."""
    return frozenset(f.name for f in dataclasses.fields(record))  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class User(Record):
    id: int
    name: str
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class Group(Record):
    id: int
    name: str
    policy: dict[str, Any]
    created_at: datetime


class Role(StrEnum):
    """What a member may decide in their group."""

    member = "member"
    """Submits jobs; decides dependency requests where the policy says `member`."""
    admin = "admin"
    """Also approves runs and results, changes the policy and manages members."""


@dataclasses.dataclass(frozen=True)
class Membership(Record):
    group_id: int
    user_id: int
    role: Role

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", Role(self.role))


@dataclasses.dataclass(frozen=True)
class Room(Record):
    id: int
    group_id: int
    name: str
    repo: str
    base_branch: str
    verify_command: str | None
    scope: dict[str, Any]
    """What jobs in this room may do beyond the defaults (for example unsandboxed commands)."""
    created_at: datetime
    default_agent: str | None = None
    """The named agent a job submitted without `--agent` uses; None: every job names one."""


@dataclasses.dataclass(frozen=True)
class NamedAgent(Record):
    """A named agent configuration (`cairn agent add`): the spec a job stores when it names it."""

    id: int
    name: str
    spec: dict[str, Any]
    """The adapter's stored spec; never an API key, only the name of the variable holding it."""
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class Request(Record):
    """The job's intent: immutable once written."""

    id: int
    room_id: int
    requester_id: int
    kind: str
    text: str
    agent: dict[str, Any]
    scope: dict[str, Any]
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class Job(Record):
    id: int
    request_id: int
    room_id: int
    retry_of: int | None
    stage: Stage
    status: Status
    baseline: str | None
    result_fingerprint: str | None
    summary: str | None
    diagnosis: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    fencing_token: int
    created_at: datetime
    updated_at: datetime
    next_actions: tuple[NextAction, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage(self.stage))
        object.__setattr__(self, "status", Status(self.status))

    def branch_in(self, installation_id: str) -> str:
        """The job's git branch, named for its installation: job ids restart in every store."""
        # A repository may hold job N's branch of another installation (an earlier home, a
        # switch of store); the installation's id keeps this job from adopting or hitting it.
        return f"cairn/{installation_id[:8]}/job-{self.id}"


@dataclasses.dataclass(frozen=True)
class StageRun(Record):
    id: int
    job_id: int
    stage: str
    attempt: int
    recipe_id: str
    content_id: str | None
    evidence: dict[str, Any] | None
    """As stored; the engine reads it as `Evidence` (see `cairn.jobs.ledger.run_record`)."""
    status: RunStatus
    fencing_token: int
    started_at: datetime
    ended_at: datetime | None
    reused_at: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))


@dataclasses.dataclass(frozen=True)
class Decision(Record):
    id: int
    job_id: int | None
    gate: Gate
    verdict: Verdict
    actor: str
    reason: str | None
    policy: str | None
    at: datetime
    prev_hash: str
    hash: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "gate", Gate(self.gate))
        object.__setattr__(self, "verdict", Verdict(self.verdict))


class RequestStatus(StrEnum):
    """Where an agent's ask for one package version stands."""

    pending = "pending"
    """Asked; no person (or policy) has decided yet."""
    approved = "approved"
    """Approved: the job installs exactly that version."""
    rejected = "rejected"
    """Refused: the agent is told, and goes on without it."""


@dataclasses.dataclass(frozen=True)
class DependencyRequest(Record):
    id: int
    job_id: int
    ecosystem: str
    name: str
    version: str
    reason: str
    status: RequestStatus
    decision_id: int | None
    created_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RequestStatus(self.status))


@dataclasses.dataclass(frozen=True)
class Effect(Record):
    id: int
    job_id: int
    kind: str
    idempotency_key: str
    status: EffectStatus
    external_ref: str | None
    intended_at: datetime
    done_at: datetime | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", EffectStatus(self.status))


@dataclasses.dataclass(frozen=True)
class Event(Record):
    id: int
    job_id: int
    stage: Stage
    status: Status
    at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage(self.stage))
        object.__setattr__(self, "status", Status(self.status))


class RunKind(StrEnum):
    """Why an agent run happened."""

    normal = "normal"
    """The stage's own turn."""
    corrective = "corrective"
    """The one extra turn an unchanged first job gets (lifecycle rule 7)."""


@dataclasses.dataclass(frozen=True)
class Usage(Record):
    id: int
    job_id: int
    agent: str
    run_kind: RunKind
    seconds: float
    input_tokens: int
    output_tokens: int
    at: datetime
    model_requests: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_kind", RunKind(self.run_kind))


class StepKind(StrEnum):
    """What one step of a job's conversation is; the bounded context keeps some kinds always."""

    system = "system"
    """The system prompt the conversation opens with (always kept)."""
    request = "request"
    """The job's sanitized request, or a fresh start's opening message (always kept)."""
    assistant = "assistant"
    """One model answer: its text and the tool calls it made."""
    tool_result = "tool_result"
    """The result of one tool call, naming the call it answers (never executed twice)."""
    follow_up = "follow_up"
    """A person's message after the turn, such as a reviewer's `reply` (always kept)."""
    note = "note"
    """cairn's own word to the model: a dependency decision, a corrective instruction."""


@dataclasses.dataclass(frozen=True)
class ContextStep(Record):
    """One saved step of a job's conversation, numbered from 1 within the job."""

    id: int
    job_id: int
    seq: int
    kind: StepKind
    payload: dict[str, Any]
    fencing_token: int
    """The lease that wrote it: a step is only ever written under the job's current token."""
    at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", StepKind(self.kind))


@dataclasses.dataclass(frozen=True)
class Schedule(Record):
    """A standing request: each firing submits one scheduled job as `requester_id`."""

    id: int
    name: str
    room_id: int
    cron: str
    """Five cron fields (or an @alias), read in UTC."""
    request: str
    """Sanitized once when the schedule was added; every firing submits it as it is."""
    agent: dict[str, Any]
    requester_id: int
    created_at: datetime


class FiringTrigger(StrEnum):
    """What made a schedule fire."""

    cron = "cron"
    """A runner found the schedule due (the latest fire time, never a backlog)."""
    manual = "manual"
    """A person ran `cairn schedule fire`."""


class FiringOutcome(StrEnum):
    """What one firing came to."""

    pending = "pending"
    """Claimed by a runner whose transaction has not settled it yet (never committed so)."""
    created = "created"
    """A scheduled job was submitted; `job_id` names it."""
    skipped = "skipped"
    """No job: the requester may no longer submit to the room; `note` says why."""


@dataclasses.dataclass(frozen=True)
class Firing(Record):
    """One firing of a schedule: at most one per schedule and fire time."""

    id: int
    schedule_id: int
    fire_at: datetime
    trigger: FiringTrigger
    outcome: FiringOutcome
    job_id: int | None
    note: str | None
    at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "trigger", FiringTrigger(self.trigger))
        object.__setattr__(self, "outcome", FiringOutcome(self.outcome))
