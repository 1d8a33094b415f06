"""What every coding-CLI module implements, and the shapes the shared CLI machinery passes.

A coding CLI (Claude Code; Codex CLI and Aider next) is one small module implementing
`CliModule`: its command line, its environment, how its event stream reads, and where its
session file lives. Everything else is shared (`cli_turn`): the job's own session id, the
session file saved into the job's context and restored before a turn, the sandbox, the
dependency requests over MCP, and the outcome read from the workspace and the CLI's final
event. A new CLI is one more module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cairn.agents.base import Usage

ACTIVITY_LIMIT = 40
"""The most tool calls a job's context keeps in its summary (the latest ones)."""


@dataclass(frozen=True)
class CliTurnPlan:
    """Everything a CLI module needs to build one turn's invocation."""

    workspace: Path
    state_dir: Path
    """The job's private CLI state folder (outside the workspace and every other job's)."""
    session_id: str
    resume: bool
    """True when the job's session already exists: continue it by its id, never "the last"."""
    prompt: str
    endpoint: str
    """The model endpoint as the CLI inside the sandbox reaches it."""
    api_key: str | None
    mcp_config: Mapping[str, Any]
    """The MCP servers cairn starts for the turn (`request_dependency`)."""
    model: str | None = None


@dataclass(frozen=True)
class ToolActivity:
    """One tool call of a turn as cairn keeps it: the tool, what it touched, how it ended."""

    tool: str
    target: str
    status: str = "started"

    def to_data(self) -> dict[str, str]:
        """The JSON-ready form kept in the job's context."""
        return {"tool": self.tool, "target": self.target, "status": self.status}


@dataclass
class CliReport:
    """What a turn's event stream said, bounded: never the model's raw text."""

    session_id: str | None = None
    final: Mapping[str, Any] | None = None
    """The CLI's final event (Claude Code: `result`), with its text fields left out."""
    summary: str | None = None
    """The CLI's closing message, to be masked and bounded before it is kept."""
    usage: Usage = field(default_factory=Usage)
    activity: list[ToolActivity] = field(default_factory=list)
    lost_connection: bool = False
    """The CLI said it lost the model's connection (it retried, then gave up)."""
    failure: str | None = None
    """Why the CLI says it failed, in its own words (masked before it is kept)."""


class EventReader(Protocol):
    """Reads a CLI's event stream one line at a time, into a `CliReport`."""

    report: CliReport

    def feed(self, line: str) -> None:
        """Take one line of the CLI's output (not every line is an event)."""
        ...


class CliModule(Protocol):
    """One coding CLI: how to invoke it, configure it, read it and find its session.

    A CLI that names its sessions itself (Codex CLI: the thread id of its first turn) also
    sets `reports_session_id = True`: the job's session is then the id its reader reports
    (`CliReport.session_id`), saved with the job's context as soon as it is seen.
    """

    name: str
    """The adapter's short name (`claude`)."""

    def command_line(self, binary: str, plan: CliTurnPlan) -> list[str]:
        """The argv of one headless turn; resumes by `plan.session_id`, never "the last"."""
        ...

    def environment(self, plan: CliTurnPlan) -> dict[str, str]:
        """Only the variables the CLI needs (its endpoint, key, state folder, switches)."""
        ...

    def reader(self, workspace: Path) -> EventReader:
        """A fresh reader of the CLI's event stream for a turn in `workspace`."""
        ...

    def session_file(self, plan: CliTurnPlan) -> Path:
        """Where the CLI keeps the session `plan.session_id` for `plan.workspace`."""
        ...
