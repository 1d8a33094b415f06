"""Short adapter names to adapter classes, and the stored agent configuration they build from."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cairn.agents.base import Agent
from cairn.agents.script import ScriptAgent
from cairn.errors import UsageError

# Each adapter class offers `from_spec(spec)` (build from the stored configuration) and
# `spec_from_argument(text)` (turn the part after `name:` of a CLI `--agent` into that spec).
AGENTS: dict[str, type[Any]] = {ScriptAgent.name: ScriptAgent}


def get_agent(spec: Mapping[str, Any]) -> Agent:
    """Build the agent a job's stored configuration names, e.g. `{"adapter": "script", ...}`."""
    if not isinstance(spec, Mapping):
        raise UsageError(
            "an agent configuration must be a mapping with an `adapter` name; "
            f"valid adapters: {_valid_names()}"
        )
    adapter: Agent = _adapter_class(spec.get("adapter")).from_spec(spec)
    return adapter


def load_agent_spec(text: str) -> dict[str, Any]:
    """Turn a CLI `--agent` value such as `script:PATH` into a storable agent configuration."""
    name, _, argument = text.partition(":")
    spec: dict[str, Any] = _adapter_class(name.strip()).spec_from_argument(argument)
    return spec


def _adapter_class(name: object) -> type[Any]:
    adapter = AGENTS.get(name) if isinstance(name, str) else None
    if adapter is None:
        # Echo the name only when it looks like one: a mistyped value may be a local path.
        shown = name if isinstance(name, str) and re.fullmatch(r"[\w.-]{1,40}", name) else None
        what = f"unknown agent adapter {shown!r}" if shown else "no known agent adapter was named"
        raise UsageError(
            f"{what}; valid adapters: {_valid_names()} (for example --agent script:demo.yaml)"
        )
    return adapter


def _valid_names() -> str:
    return ", ".join(sorted(AGENTS))
