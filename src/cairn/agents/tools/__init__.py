"""Agent tooling every adapter shares: exactly-once edits and the model's file tools."""

from __future__ import annotations

from cairn.agents.tools.edits import EditJournal, Intent, RecordIntent, ToolFailed, apply_once
from cairn.agents.tools.files import (
    ToolResult,
    ToolStatus,
    list_files,
    read_file,
    replace_in_file,
    search,
    write_file,
)

__all__ = [
    "EditJournal",
    "Intent",
    "RecordIntent",
    "ToolFailed",
    "ToolResult",
    "ToolStatus",
    "apply_once",
    "list_files",
    "read_file",
    "replace_in_file",
    "search",
    "write_file",
]
