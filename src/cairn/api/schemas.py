"""What the API accepts and answers, beyond the job views it shares with the CLI (jobs.view)."""

from __future__ import annotations

from typing import Annotated, Any

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
    kind: str = Field("interactive", description="interactive, or scheduled.")


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


class ProgressEvent(BaseModel):
    """What an SSE message carries, and nothing more: rule 6, progress not logs."""

    job: int
    stage: Stage
    status: Status
    seq: int
