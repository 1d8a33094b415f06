"""Codex CLI's `--json` events (as of 0.171.0) read into a bounded `CliReport`.

    {"type":"thread.started","thread_id":"<uuid>"}
    {"type":"item.started"|"item.completed","item":{"type":"command_execution"|"file_change"|
        "mcp_tool_call"|"agent_message"|..., ...}}
    {"type":"turn.completed","usage":{"input_tokens":..,"output_tokens":..}}
    {"type":"turn.failed","error":{"message":"..."}}   (after "error" events while retrying)

Only the allowlisted item kinds become tool activity (tool, path or command, status); the
model's text is kept only as the closing message, which cairn masks and bounds.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from cairn.agents.base import Usage
from cairn.agents.cli_agent import CliReport, ToolActivity
from cairn.agents.codex_config import API_KEY_ENV

THREAD_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A Codex thread id (a UUID): the only form one may take in a command line."""
_STATUS = re.compile(r"\b([1-5][0-9]{2}) [A-Z][A-Za-z ]+")
_URL = re.compile(r",?\s*url: \S+")
_LOST = (
    "stream disconnected",
    "error sending request",
    "transport error",
    "connection",
    "timed out",
    "timeout",
)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,60}")
_SHELL_WRAPPED = re.compile(r"\S*/(?:ba|z|da)?sh -l?c '(.*)'", re.DOTALL)
"""How Codex reports a command it ran: wrapped in the user's shell (`/bin/bash -lc '...'`)."""


class CodexEvents:
    """Reads Codex CLI's `--json` lines into a report; keeps no model text but the last."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.report = CliReport()
        self._items: dict[str, ToolActivity] = {}
        self._started: float | None = None

    def feed(self, line: str) -> None:
        """Take one line of output; what is not a JSON event (a warning) is ignored."""
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "thread.started":
            thread = event.get("thread_id")
            if isinstance(thread, str) and THREAD_ID.fullmatch(thread):
                self.report.session_id = thread
        elif kind == "turn.started":
            self._started = time.monotonic()
        elif kind in ("item.started", "item.updated", "item.completed"):
            self._item(event.get("item"))
        elif kind == "error":
            self.report.lost_connection = True  # Codex is retrying; the final event decides
        elif kind == "turn.completed":
            self._completed(event)
        elif kind == "turn.failed":
            self._failed(event)

    def _item(self, item: object) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        if kind == "agent_message" and isinstance(item.get("text"), str):
            self.report.summary = item["text"]
            return
        found = self._activity(item)
        if found is None:
            return
        key = str(item.get("id"))
        earlier = self._items.get(key)
        self._items[key] = found
        if earlier is None:
            self.report.activity.append(found)
        else:
            self.report.activity[self.report.activity.index(earlier)] = found

    def _activity(self, item: dict[str, Any]) -> ToolActivity | None:
        kind, status = item.get("type"), _status(item)
        if kind == "command_execution":
            command = item.get("command")
            text = _unwrapped(command).strip() if isinstance(command, str) else ""
            return ToolActivity("exec_command", text.splitlines()[0][:120] if text else "", status)
        if kind == "file_change":
            changes = item.get("changes") if isinstance(item.get("changes"), list) else []
            assert isinstance(changes, list)
            paths = [
                _relative(self.workspace, str(c.get("path")))
                for c in changes
                if isinstance(c, dict) and isinstance(c.get("path"), str)
            ]
            return ToolActivity("apply_patch", ", ".join(paths)[:200], status)
        if kind == "mcp_tool_call":
            server, tool = item.get("server"), item.get("tool")
            if isinstance(server, str) and isinstance(tool, str):
                name = f"mcp__{server}__{tool}"
                return ToolActivity(name if _NAME.fullmatch(name) else "mcp", "", status)
        return None

    def _completed(self, event: dict[str, Any]) -> None:
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        seconds = time.monotonic() - self._started if self._started is not None else 0.0
        self.report.usage = Usage(
            model_requests=0,  # Codex does not say how many requests a turn took
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            seconds=seconds,
        )
        self.report.final = {"type": "turn.completed"}
        self.report.lost_connection = False

    def _failed(self, event: dict[str, Any]) -> None:
        error = event.get("error") if isinstance(event.get("error"), dict) else {}
        assert isinstance(error, dict)
        message = error.get("message") if isinstance(error.get("message"), str) else ""
        assert isinstance(message, str)
        message = _URL.sub("", message).strip()
        self.report.final = {"type": "turn.failed"}
        status = _STATUS.search(message)
        code = int(status.group(1)) if status else None
        if code in (401, 403):
            self.report.lost_connection = False
            self.report.failure = (
                f"the model endpoint refused the key (HTTP {code}); set the runner's "
                f"{API_KEY_ENV} to a key it accepts"
            )
        elif (code is not None and (code == 429 or code >= 500)) or any(
            word in message.lower() for word in _LOST
        ):
            self.report.lost_connection = True  # a busy or broken server: a lost turn
        else:
            self.report.lost_connection = False
            self.report.failure = message or "the turn failed"


def _unwrapped(command: str) -> str:
    """The command as the model wrote it, without Codex's shell wrapper (and its path)."""
    wrapped = _SHELL_WRAPPED.fullmatch(command.strip())
    return wrapped.group(1).replace("'\\''", "'") if wrapped else command


def _status(item: dict[str, Any]) -> str:
    status = item.get("status")
    if status == "in_progress":
        return "started"
    exit_code = item.get("exit_code")
    if status == "failed" or (isinstance(exit_code, int) and exit_code != 0):
        return "error"
    return "ok" if status == "completed" else "started"


def _relative(workspace: Path, path: str) -> str:
    """A workspace path as the reviewer reads it; a path outside it is never shown."""
    given = Path(path)
    if not given.is_absolute():
        return str(given)[:200]
    try:
        return str(given.relative_to(workspace))[:200]
    except ValueError:
        return "(outside the workspace)"
