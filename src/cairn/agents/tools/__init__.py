"""Agent tooling every adapter shares: exactly-once edits and the model's file tools.

An adapter calls the file tools with the workspace and the model's arguments and hands the
`ToolResult` back to the model; none of them raises for the model's mistakes. The editing
tools take an `EditJournal`: its `record` saves the `Intent` with the job's context (before
the edit happens), and a resumed tool call whose result was never saved passes that saved
intent back as `pending`, so the edit is not made twice:

    def record(intent: Intent, changes: bool) -> None:
        save_state({**state, "pending_edit": {"call": call_id, **intent.to_data()}})

    pending = Intent.from_data(saved) if saved and saved.get("call") == call_id else None
    result = replace_in_file(workspace, path, old, new, EditJournal(pending, record))
"""

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
