"""Helpers for the agent tests: a recording context store that can crash, and turn builders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cairn.agents import Outcome, Script, ScriptAgent, Turn, parse_script


class Crash(Exception):
    """Stands in for the runner process dying at a `save_state` call."""


class ContextStore:
    """Records every saved state; can crash on the call after `crash_after` saves succeeded."""

    def __init__(self, crash_after: int | None = None) -> None:
        self.saved: list[dict[str, Any]] = []
        self.crash_after = crash_after

    def __call__(self, state: dict[str, Any], outcome: Outcome | None = None) -> None:
        if self.crash_after is not None and len(self.saved) >= self.crash_after:
            raise Crash(f"crashed at save {len(self.saved) + 1}")
        # A JSON round trip proves the state is storable and detaches it from the agent's dict.
        self.saved.append(json.loads(json.dumps(state)))

    @property
    def last(self) -> dict[str, Any] | None:
        return self.saved[-1] if self.saved else None


def turn_for(
    workspace: Path,
    store: ContextStore,
    state: dict[str, Any] | None = None,
    notes: tuple[str, ...] = (),
    job_id: int = 1,
) -> Turn:
    """A turn of job `job_id` whose context is saved into `store`."""
    return Turn(
        job_id=job_id,
        workspace=workspace,
        request="do the thing",
        state=state,
        save_state=store,
        workspace_id=lambda: _tree_of(workspace),
        notes=notes,
    )


def _tree_of(workspace: Path) -> str:
    """A content identity of the workspace's files (the agent only compares it for equality)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in workspace.rglob("*") if ".git" not in p.parts and p.is_file()):
        digest.update(str(path.relative_to(workspace)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def run_script(
    text_or_script: str | Script,
    workspace: Path,
    state: dict[str, Any] | None = None,
    **agent_settings: Any,
) -> tuple[Outcome, ContextStore]:
    """Run one turn of a script agent and return its outcome and every state it saved."""
    script = parse_script(text_or_script) if isinstance(text_or_script, str) else text_or_script
    store = ContextStore()
    outcome = ScriptAgent(script, **agent_settings).run_turn(turn_for(workspace, store, state))
    return outcome, store


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (symlinks not followed) and its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
