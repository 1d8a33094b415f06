"""The agents `cairn demo` can run: the scripted agent, or a model over the OpenAI API.

`--agent openai` runs the demo's job through the `openai` adapter: against
`ScriptedOpenAIServer` on 127.0.0.1, whose answers make the same change the scripted agent
makes (`demo_answers`), or against a real endpoint when OPENAI_BASE_URL is set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.agents.openai_spec import check_base_url, openai_spec
from cairn.agents.registry import load_agent_spec
from cairn.agents.script_format import (
    AppendStep,
    FinishStep,
    RequestDependencyStep,
    RunStep,
    WriteStep,
    parse_script,
)
from cairn.errors import UsageError
from cairn.testing.openai_script import Answer, ToolCall, tool_call_answer
from cairn.testing.openai_server import DEFAULT_MODELS, ScriptedOpenAIServer
from cairn.testing.repos import SAMPLE_FILES

DEMO_AGENTS = ("script", "openai")
DEMO_KEY_ENV = "DEMO_OPENAI_API_KEY"  # api_key_env may not name a CAIRN_* variable
"""The variable the demo's spec names for the scripted server's key (it takes any key)."""
DEMO_KEY = "cairn-demo-key"
DEFAULT_MODEL = "gpt-4o-mini"
"""The model asked of a real endpoint when neither --model nor OPENAI_MODEL names one."""
# Where the demo's replace_in_file anchors its README change: the sample README's last line.
README_ANCHOR = "Run the tests with `python -m pytest`.\n"


@dataclass(frozen=True)
class DemoAgent:
    """The agent spec the demo's job is submitted with, and how the narration names it."""

    spec: dict[str, Any]
    label: str
    server: ScriptedOpenAIServer | None = None
    """The scripted server answering it, when the demo runs against one."""


def script_agent(script: Path) -> DemoAgent:
    """The scripted agent replaying the YAML script at `script`."""
    return DemoAgent(load_agent_spec(f"script:{script}"), "the scripted agent")


@contextmanager
def openai_agent(
    marker: str, script_text: str, environ: Mapping[str, str], model: str | None = None
) -> Iterator[DemoAgent]:
    """An `openai` agent: a real endpoint when `environ` sets OPENAI_BASE_URL, else a scripted
    server on 127.0.0.1 replaying `demo_answers(script_text)` for the conversation naming
    `marker` (the demo's request), served while the block runs.
    """
    base_url = environ.get("OPENAI_BASE_URL", "").strip()
    if base_url:
        try:
            url = check_base_url(base_url)
        except ValueError as exc:
            raise UsageError(f"OPENAI_BASE_URL {exc}") from None
        name = model or environ.get("OPENAI_MODEL", "").strip() or DEFAULT_MODEL
        spec = openai_spec({"model": name, "base_url": url})
        yield DemoAgent(spec, f"model {spec['model']} (OPENAI_BASE_URL)")
        return
    with ScriptedOpenAIServer({marker: demo_answers(script_text)}) as server:
        spec = openai_spec(
            {"model": model or DEFAULT_MODELS[0], "base_url": server.base_url}
            | {"api_key_env": DEMO_KEY_ENV}
        )
        yield DemoAgent(spec, f"model {spec['model']} (a scripted OpenAI server)", server)


def demo_answers(script_text: str) -> list[Answer]:
    """The model answers that make the scripted agent's change through the model's tools.

    One tool call per answer, in the script's order: writes become `write_file`, the README
    append a `replace_in_file` at its last line, commands `run`, the package ask
    `request_dependency`, and the end `finish`.
    """
    return [tool_call_answer(_call(step)) for step in parse_script(script_text).steps]


def _call(step: object) -> ToolCall:
    if isinstance(step, WriteStep):
        return ToolCall("write_file", {"path": step.path, "content": step.content})
    if isinstance(step, AppendStep):
        if step.path != "README.md":
            raise ValueError("the demo's model appends only to the sample README")
        old = README_ANCHOR
        assert SAMPLE_FILES["README.md"].endswith(old), "the sample README ends with the anchor"
        return ToolCall(
            "replace_in_file", {"path": step.path, "old": old, "new": old + step.content}
        )
    if isinstance(step, RunStep):
        return ToolCall("run", {"command": step.command})
    if isinstance(step, RequestDependencyStep):
        ask = {"ecosystem": step.ecosystem, "name": step.name, "version": step.version}
        return ToolCall("request_dependency", ask | {"reason": step.reason})
    if isinstance(step, FinishStep):
        return ToolCall("finish", {"summary": step.summary or ""})
    raise ValueError(f"the demo's model has no tool for a {type(step).__name__}")
