"""The agent stage builds its agent with the runner's Config and records the Outcome's usage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from cairn.agents import Outcome, ScriptAgent, Turn, Usage
from cairn.config import Config
from cairn.testing.harness import Cairn

WRITE = "steps:\n  - write: {path: made.txt, content: made}\n  - finish: {summary: done}\n"


def test_the_stage_records_the_tokens_the_outcome_reports(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ScriptAgent.run_turn

    def costly(self: ScriptAgent, turn: Turn) -> Outcome:
        return replace(real(self, turn), usage=Usage(3, 1200, 340, 2.5))

    monkeypatch.setattr(ScriptAgent, "run_turn", costly)
    job = cairn.submit(WRITE)
    cairn.work()
    usage = cairn.detail(job.id)["usage"]
    assert usage["agent_runs"] == 1
    assert usage["input_tokens"] == 1200 and usage["output_tokens"] == 340
    assert usage["model_requests"] == 3


def test_the_stage_builds_the_agent_with_the_runner_s_config(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[Config | None] = []
    real = ScriptAgent.from_spec.__func__  # type: ignore[attr-defined]

    def from_spec(
        cls: type[ScriptAgent], spec: Mapping[str, Any], config: Config | None = None
    ) -> ScriptAgent:
        given.append(config)
        built: ScriptAgent = real(cls, spec, config)
        return built

    monkeypatch.setattr(ScriptAgent, "from_spec", classmethod(from_spec))
    cairn.submit(WRITE)
    cairn.work()
    assert given and all(config is cairn.config for config in given)
