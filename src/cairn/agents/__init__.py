"""Agent adapters: one turn in a workspace, one outcome; `get_agent` builds one by short name.

The `script` adapter replays a YAML script deterministically and keeps its position in the
job's own context, so it resumes exactly like a real agent; the demo and the tests drive it.
`cairn.agents.tools` holds what every adapter shares: exactly-once edits and the file tools.
"""

from __future__ import annotations

from cairn.agents.base import (
    Agent,
    Conversation,
    DependencyAsk,
    JobFacts,
    Outcome,
    OutcomeKind,
    Turn,
    Usage,
)
from cairn.agents.registry import AGENTS, AgentFactory, get_agent, load_agent_spec
from cairn.agents.script import ScriptAgent
from cairn.agents.script_format import (
    AppendStep,
    DeleteStep,
    FailStep,
    FinishStep,
    LoseStreamStep,
    RequestDependencyStep,
    RunStep,
    Script,
    Step,
    WriteStep,
    parse_script,
    script_from_data,
    script_to_data,
)

__all__ = [
    "Conversation",
    "JobFacts",
    "AGENTS",
    "Agent",
    "AgentFactory",
    "AppendStep",
    "DeleteStep",
    "DependencyAsk",
    "FailStep",
    "FinishStep",
    "LoseStreamStep",
    "Outcome",
    "OutcomeKind",
    "RequestDependencyStep",
    "RunStep",
    "Script",
    "ScriptAgent",
    "Step",
    "Turn",
    "Usage",
    "WriteStep",
    "get_agent",
    "load_agent_spec",
    "parse_script",
    "script_from_data",
    "script_to_data",
]
