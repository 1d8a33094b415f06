"""The typed agent factory gets the runner's Config; an Outcome carries the turn's usage."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.agents import AGENTS, Outcome, OutcomeKind, Turn, Usage, get_agent
from cairn.config import Config

from .support import run_script


class RecordingAgent:
    """An adapter that keeps what the factory gave it."""

    name = "recording"

    def __init__(self, spec: Mapping[str, Any], config: Config | None) -> None:
        self.spec = spec
        self.config = config

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], config: Config | None = None) -> RecordingAgent:
        return cls(spec, config)

    @classmethod
    def spec_from_argument(cls, argument: str) -> dict[str, Any]:
        return {"adapter": cls.name, "model": argument}

    def run_turn(self, turn: Turn) -> Outcome:
        return Outcome(OutcomeKind.no_change)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(AGENTS, RecordingAgent.name, RecordingAgent)


@pytest.mark.usefixtures("recording")
def test_the_factory_hands_the_runner_s_config_to_the_adapter(tmp_path: Path) -> None:
    config = Config(home=tmp_path)
    agent = get_agent({"adapter": "recording", "model": "m"}, config)
    assert isinstance(agent, RecordingAgent)
    assert agent.config is config and agent.spec == {"adapter": "recording", "model": "m"}


@pytest.mark.usefixtures("recording")
def test_without_a_runner_the_adapter_gets_no_config() -> None:
    agent = get_agent({"adapter": "recording"})
    assert isinstance(agent, RecordingAgent) and agent.config is None


def test_the_script_agent_is_built_through_the_factory_with_a_config(tmp_path: Path) -> None:
    agent = get_agent({"adapter": "script", "script": {"steps": []}}, Config(home=tmp_path))
    assert agent.name == "script"


def test_the_script_agent_reports_zero_usage(workspace: Path) -> None:
    outcome, _store = run_script("steps: [write: {path: a.txt, content: x}]", workspace)
    assert outcome.usage == Usage() == Usage(0, 0, 0, 0.0)


def test_usage_adds_up_and_survives_the_stored_form() -> None:
    total = Usage(1, 100, 20, 0.5) + Usage(2, 50, 5, 1.0)
    assert total == Usage(3, 150, 25, 1.5)
    outcome = Outcome(OutcomeKind.changed, summary="s", usage=total)
    assert Outcome.from_data(outcome.to_data()) == outcome


def test_an_outcome_stored_before_usage_existed_reads_as_zero_usage() -> None:
    old = {"kind": "changed", "summary": "s", "diagnosis": None, "dependency": None}
    assert Outcome.from_data(old).usage == Usage()
