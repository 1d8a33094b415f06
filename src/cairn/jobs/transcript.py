"""What a reviewer sees of a job's conversation: the tool calls made, never the model's text.

Read from the job's own `tool_result` steps, whose payload is
`{"call_id": str, "name": str, "target": str | None, "ok": bool, "content": str}`. Only the
tool's name, its target (a path or a command, masked and bounded) and whether it succeeded
are shown; the content and every model answer stay in the bounded context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from cairn.sanitize import bound, mask_secret_shapes, strip_control
from cairn.store import context_steps
from cairn.store.records import StepKind

MAX_CALLS = 50
"""How many tool calls a summary lists; the rest are counted."""
TARGET_LIMIT = 120
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")


@dataclass(frozen=True)
class ToolCallLine:
    """One tool call as a reviewer sees it."""

    name: str
    target: str | None
    status: str
    """ok, or error (the tool refused or failed; the model was told)."""


@dataclass(frozen=True)
class TranscriptSummary:
    """The first `MAX_CALLS` tool calls of the job's conversation and how many more there were."""

    calls: tuple[ToolCallLine, ...]
    omitted: int

    @property
    def total(self) -> int:
        return len(self.calls) + self.omitted


def transcript_summary(conn: sa.Connection, job_id: int) -> TranscriptSummary:
    """The tool calls the job's conversation made, bounded and masked."""
    results = [
        step.payload
        for step in context_steps.steps(conn, job_id)
        if step.kind is StepKind.tool_result
    ]
    calls = tuple(_line(payload) for payload in results[:MAX_CALLS])
    return TranscriptSummary(calls=calls, omitted=max(0, len(results) - MAX_CALLS))


def _line(payload: dict[str, Any]) -> ToolCallLine:
    name = payload.get("name")
    target = payload.get("target")
    return ToolCallLine(
        # A name the model made up is shown only when it looks like a name.
        name=name if isinstance(name, str) and _TOOL_NAME.fullmatch(name) else "unknown",
        target=_masked(target) if isinstance(target, str) else None,
        status="ok" if payload.get("ok") is True else "error",
    )


def _masked(text: str) -> str:
    # One line: a command's newlines would break the text view's one line per call.
    flat = " ".join(strip_control(text).split())
    return bound(mask_secret_shapes(flat), TARGET_LIMIT)
