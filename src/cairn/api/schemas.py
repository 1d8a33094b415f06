"""What the API accepts and answers, beyond the job views it shares with the CLI (jobs.view)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cairn.jobs.policy import REASON_LIMIT
from cairn.jobs.submit import REQUEST_LIMIT
from cairn.stages import Stage, Status

ROOM_NAME = r"^[\w.-]{1,64}$"
"""A room's name as `cairn room create` allows it (no control character reaches the store)."""
RoomName = Annotated[
    str, StringConstraints(pattern=ROOM_NAME), Field(description="The room's name.")
]


class Body(BaseModel):
    """A request body: unknown fields are refused, so a typo is not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class SubmitBody(Body):
    room: RoomName
    request: str = Field(min_length=1, max_length=REQUEST_LIMIT, description="What to do.")
    agent: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        pattern=r"^[^\x00]+$",
        description="A named agent or `openai:MODEL` (default: the room's agent); never "
        "`script:PATH`, a file on the server: send a script in `script` instead.",
    )
    script: str | None = Field(
        None,
        min_length=1,
        max_length=256 * 1024,
        pattern=r"^[^\x00]+$",
        description="The YAML of a script agent, for a scripted job.",
    )
    kind: Literal["interactive", "scheduled"] = Field(
        "interactive", description="interactive, or scheduled (a fresh context every run)."
    )


class ApproveBody(Body):
    reason: str | None = Field(None, max_length=REASON_LIMIT)


class RejectBody(Body):
    reason: str = Field(min_length=1, max_length=REASON_LIMIT, description="Why (required).")


class ReplyBody(Body):
    message: str = Field(min_length=1, max_length=REASON_LIMIT, description="What to change.")
    fresh: bool = Field(
        False, description="Start the agent in a fresh context (request, message, current diff)."
    )


class Reply(BaseModel):
    """The answer of every decision: where the job stands now."""

    id: int
    stage: Stage
    status: Status


class ErrorBody(BaseModel):
    """Every error: one sanitized line, and what a person can do next (structured)."""

    error: str
    next: list[dict[str, Any]] = []


class Health(BaseModel):
    status: str


class Member(BaseModel):
    name: str
    role: str


class GroupView(BaseModel):
    name: str
    policy: dict[str, Any]
    policy_text: str
    members: list[Member]
    rooms: list[str]


class RoomView(BaseModel):
    """A room as a member sees it; the repository is left out (it may be a local path)."""

    id: int
    name: str
    group: str
    base: str
    verify: str | None = None
    """The command that checks a result in the room, as its admin set it."""
    agent: str | None = None
    """The named agent jobs submitted without one use."""


class ProgressEvent(BaseModel):
    """What an SSE message carries, and nothing more: rule 6, progress not logs."""

    job: int
    stage: Stage
    status: Status
    seq: int


NAME = r"^[\w.-]{1,64}$"
"""A group's, user's or schedule's name in a path (no control character reaches the store)."""


class MemberBody(Body):
    name: str = Field(pattern=NAME, description="The user to add, or whose role to change.")
    role: Literal["member", "admin"] = "member"


class MembershipView(BaseModel):
    """A membership after a change: `role` None once removed, `before` the role there was."""

    group: str
    name: str
    role: str | None
    before: str | None


class AgentBody(Body):
    """A named agent's settings, as `cairn agent add` takes them (never a key, only its name)."""

    name: str = Field(min_length=1, max_length=40)
    adapter: str = Field(min_length=1, max_length=40, description="openai, claude, codex or aider.")
    model: str | None = Field(None, min_length=1, max_length=256, description="openai: required.")
    command: str | None = Field(
        None, min_length=1, max_length=4096, description="A CLI adapter's binary on the runners."
    )
    base_url: str | None = Field(None, min_length=1, max_length=2048)
    api_key_env: str | None = Field(None, min_length=1, max_length=256)
    max_turn_steps: int | None = Field(None, ge=1, le=10_000)
    context_tokens: int | None = Field(None, ge=1, le=10_000_000)
    temperature: float | None = Field(None, ge=0, le=2)
    stream: bool | None = None
    tool_protocol: str | None = Field(None, min_length=1, max_length=20)


class AgentView(BaseModel):
    """A named agent's stored spec (its adapter, model and settings; never a key)."""

    model_config = ConfigDict(extra="allow")

    name: str
    adapter: str


class ScheduleBody(Body):
    name: str = Field(pattern=NAME)
    room: RoomName
    request: str = Field(min_length=1, max_length=REQUEST_LIMIT)
    cron: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    agent: str | None = Field(None, min_length=1, max_length=4096, pattern=r"^[^\x00]+$")
    script: str | None = Field(None, min_length=1, max_length=256 * 1024, pattern=r"^[^\x00]+$")


class ScheduleView(BaseModel):
    """A schedule as `cairn schedule list --json` shows it."""

    name: str
    room: str
    cron: str
    request: str
    agent: str
    requester: str
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    last_job: int | None
    last_outcome: str | None
    last_note: str | None
    problem: str | None


class FiringView(BaseModel):
    job: int
    fire_at: datetime


class ChainView(BaseModel):
    """What `cairn audit verify --json` reports, and the first broken row's problem."""

    ok: bool
    checked: int
    broken_id: int | None
    problem: str | None
    head_in_chain: bool | None = None


class UserBody(Body):
    """A new user, as `cairn user add` takes them."""

    name: str = Field(pattern=NAME, description="The new user's name.")
    group: str = Field("default", pattern=NAME, description="The group to add them to.")
    role: Literal["member", "admin"] = "member"


class UserMade(BaseModel):
    """A new user and their API token: shown this once, to the admin who added them."""

    name: str
    group: str
    role: str
    token: str


class TokenView(BaseModel):
    """A user's new API token, shown this once; the old one no longer works."""

    name: str
    token: str


class UserRow(BaseModel):
    """A user, their groups with their role in each, and whether they hold a token (never it)."""

    name: str
    groups: dict[str, str]
    has_token: bool


class PolicySettings(Body):
    """Group policy settings as `cairn group add/policy` takes them; unset ones left alone."""

    run_approval: Literal["admin", "auto"] | None = None
    auto_approve_kinds: list[Literal["interactive", "scheduled"]] | None = Field(None, max_length=2)
    dependency_approval: Literal["admin", "member"] | None = None
    integration: Literal["admin"] | None = None


class GroupBody(Body):
    name: str = Field(pattern=NAME, description="The new group's name.")
    policy: PolicySettings | None = None
    """The policy's settings; unset ones take the strict default."""


class PolicyBody(Body):
    settings: PolicySettings
    reason: str | None = Field(None, max_length=REASON_LIMIT, description="Why the change.")


class PolicyView(BaseModel):
    """A group's policy after a change, the one before, and the decision that records it."""

    group: str
    policy: dict[str, Any]
    policy_text: str
    before: dict[str, Any]
    decision: int | None
    """None when the policy already was what was asked: nothing changed, nothing recorded."""


class CredentialBody(Body):
    """A forge token to store encrypted; the answer never carries it back."""

    name: str = Field(pattern=NAME, description="The name a room's --forge-credential uses.")
    group: str = Field("default", pattern=NAME, description="The group whose admin you are.")
    secret: str = Field(
        min_length=1, max_length=4096, pattern=r"^[^\x00]+$", description="The forge token."
    )


class CredentialView(BaseModel):
    name: str


class DecisionRow(BaseModel):
    """A decision as `cairn audit log --json` prints it."""

    id: int
    job: int | None
    gate: str
    verdict: str
    actor: str
    reason: str | None
    policy: str | None
    at: str


class HeadView(BaseModel):
    """What `cairn audit head --json` prints: the count and head hash to keep elsewhere."""

    count: int
    head: str | None


class CheckLine(BaseModel):
    what: str
    ok: bool
    checked: bool
    """False: not checked (an earlier line failed), and so never reported fine."""
    why: str | None


class RoomCheckView(BaseModel):
    """What `cairn room check --json` prints: can the room's credential read and push."""

    room_forge: str
    ok: bool
    checks: list[CheckLine]


class RoomAgentBody(Body):
    agent: str | None = Field(
        description="The named agent the room's jobs use when they name none; null clears it.",
        max_length=40,
    )


class RoomAgentView(BaseModel):
    room: str
    agent: str | None


_LINE = r"^[^\x00-\x1f\x7f]+$"
"""One line of text: no control character reaches git or the store."""


class RoomCreateBody(Body):
    """`cairn room create`'s options; the repository is a forge's or a remote git URL."""

    name: RoomName
    group: str = Field("default", pattern=NAME, description="The group that owns the room.")
    repo: str | None = Field(
        None,
        min_length=1,
        max_length=2048,
        pattern=_LINE,
        description="A remote git URL (https:// or ssh); never a path on the server. With "
        "`forge`, the forge's own URL or nothing.",
    )
    base: str | None = Field(None, min_length=1, max_length=255, pattern=_LINE)
    verify: str | None = Field(None, min_length=1, max_length=4096, pattern=_LINE)
    agent: str | None = Field(None, min_length=1, max_length=40, pattern=_LINE)
    forge: str | None = Field(None, min_length=1, max_length=40, pattern=_LINE)
    forge_repo: str | None = Field(None, min_length=1, max_length=255, pattern=_LINE)
    forge_url: str | None = Field(None, min_length=1, max_length=2048, pattern=_LINE)
    forge_token_env: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        pattern=_LINE,
        description="Refused through the API (it names the server's environment); use "
        "`forge_credential`.",
    )
    forge_credential: str | None = Field(None, min_length=1, max_length=64, pattern=NAME)
    delivery: str | None = Field(None, min_length=1, max_length=40, pattern=_LINE)


class RoomRebindBody(Body):
    """`cairn room rebind`'s options; the repository is a remote git URL (or the forge's)."""

    repo: str = Field(min_length=1, max_length=2048, pattern=_LINE)
    base: str | None = Field(None, min_length=1, max_length=255, pattern=_LINE)


class RoomMadeView(BaseModel):
    """A room just created or rebound, as the CLI reports it (the repository left out)."""

    name: str
    group: str
    base: str
    forge: str | None = None
    """`kind owner/name` for a forge room."""
    agent: str | None = None
