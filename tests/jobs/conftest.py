"""Fixtures for the jobs tests, beside cairn's own (`cairn`, `store`: cairn.testing.plugin).

- `turns`: every turn the script agent was handed in this test, as cairn handed it (the
  `Turn`: the job, the context it resumes from, the notes it is told). Tests check what an
  agent was told through it, at the agent interface, not in the script agent's saved state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from cairn.agents import ScriptAgent
from cairn.agents.base import Outcome, Turn
from cairn.testing.harness import Cairn

__all__ = ["Cairn"]  # test_engine_stages.py and test_gc.py import it from here


@dataclass
class Turns:
    """The turns agents were given, in order."""

    given: list[Turn] = field(default_factory=list)

    def of(self, job_id: int) -> list[Turn]:
        """The turns of one job."""
        return [turn for turn in self.given if turn.job_id == job_id]

    def notes(self, job_id: int) -> list[str]:
        """Everything cairn told the job's agent, in order."""
        return [note for turn in self.of(job_id) for note in turn.notes]

    def first_context(self, job_id: int) -> dict[str, Any] | None:
        """The context the job's first turn started from (None: a fresh one)."""
        return self.of(job_id)[0].state


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> Turns:
    recorded = Turns()
    real = ScriptAgent.run_turn

    def run_turn(self: ScriptAgent, turn: Turn) -> Outcome:
        recorded.given.append(turn)
        return real(self, turn)

    monkeypatch.setattr(ScriptAgent, "run_turn", run_turn)
    return recorded
