"""Short adapter names to adapter classes, and the stored agent configuration they build from."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from cairn.agents.aider_cli import AiderAgent
from cairn.agents.base import Agent
from cairn.agents.claude_code import ClaudeCodeAgent
from cairn.agents.codex_cli import CodexCliAgent
from cairn.agents.openai_agent import OpenAIAgent
from cairn.agents.script import ScriptAgent, parse_script, script_to_data
from cairn.agents.script_format import PROSE_FIELDS
from cairn.errors import UsageError
from cairn.sanitize import secret_spans, shape_spans, strip_control

if TYPE_CHECKING:  # pydantic stays out of every import of cairn.agents
    from cairn.config import Config


class AgentFactory(Protocol):
    """What each registered adapter class offers (as classmethods)."""

    name: str

    def from_spec(self, spec: Mapping[str, Any], config: Config | None = None) -> Agent:
        """Build the adapter from the job's stored spec and the runner's configuration.

        Whatever the spec must not hold (an API key) comes from `config`, the runner's own;
        None when no runner is involved (a spec checked at submit), where an adapter that
        needs the runner's secrets reports them missing only when a turn runs.
        """
        ...

    def spec_from_argument(self, argument: str) -> dict[str, Any]:
        """Turn the part after `name:` of a CLI `--agent` into a storable spec."""
        ...


AGENTS: dict[str, AgentFactory] = {
    ScriptAgent.name: ScriptAgent,
    OpenAIAgent.name: OpenAIAgent,
    ClaudeCodeAgent.name: ClaudeCodeAgent,
    CodexCliAgent.name: CodexCliAgent,
    AiderAgent.name: AiderAgent,
}

NamedLookup = Callable[[str], Mapping[str, Any] | None]
"""A named agent's stored spec by name, or None (`cairn.store.agents.lookup(conn)` is one)."""


def get_agent(spec: Mapping[str, Any], config: Config | None = None) -> Agent:
    """Build the agent a job's stored spec names, e.g. `{"adapter": "script", ...}`.

    The runner passes its `Config`: the one place an adapter may take credentials from.
    """
    if not isinstance(spec, Mapping):
        raise UsageError(
            "an agent configuration must be a mapping with an `adapter` name; "
            f"valid adapters: {_valid_names()}"
        )
    return _adapter_class(spec.get("adapter")).from_spec(spec, config)


def load_agent_spec(text: str, named: NamedLookup | None = None) -> dict[str, Any]:
    """Turn a CLI `--agent` value into a storable agent configuration.

    `ADAPTER:ARGUMENT` (`script:PATH`, `openai:MODEL`) asks the adapter to build the spec.
    A value without a colon is a named agent (`cairn agent add`) when `named` is given, e.g.
    `load_agent_spec(text, named=cairn.store.agents.lookup(conn))`: its stored spec is copied,
    so a job keeps the configuration it was submitted with.

    The configuration is stored with the job's request, so what the sanitizer masks as a secret
    must not be in it: a configuration carrying one is refused, not masked, because a masked
    script would no longer do what its author wrote.
    """
    name, colon, argument = text.partition(":")
    if not colon and named is not None and name.strip() not in AGENTS:
        spec = _named_spec(name.strip(), named)
    else:
        spec = _adapter_class(name.strip()).spec_from_argument(argument)
    _refuse_credentials(spec)
    return spec


def script_spec(text: str) -> dict[str, Any]:
    """The spec of a script agent given as YAML text: how a remote client names one.

    `script:PATH` reads a file where cairn runs, which only a local user may ask for; over the
    API the script travels in the request, checked as a script file is.
    """
    spec = {"adapter": ScriptAgent.name, "script": script_to_data(parse_script(text))}
    _refuse_credentials(spec)
    return spec


def _named_spec(name: str, named: NamedLookup) -> dict[str, Any]:
    found = named(name)
    if found is None:
        # Echo the name only when it is one: a mistyped value may be a local path.
        what = (
            f"there is no agent named {name!r}"
            if re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,39}", name)
            else "--agent names no known agent or adapter"
        )
        raise UsageError(
            f"{what}; `cairn agent list` shows the named agents, or name an adapter "
            f"(valid adapters: {_valid_names()}, e.g. --agent script:demo.yaml)"
        )
    return dict(found)


def _refuse_credentials(spec: Mapping[str, Any]) -> None:
    for path, value in _texts(spec):
        # Prose (a `fail:` message, a summary) is checked like any text cairn shows; code and
        # file content only for secrets by shape, since `token = os.environ[...]` holds none.
        find = secret_spans if path and path[-1] in PROSE_FIELDS else shape_spans
        if find(strip_control(value)):
            where = _where(path)
            raise UsageError(
                f"the agent's configuration carries what looks like a credential ({where}); "
                "cairn would store it with the job, so take it out of the script"
            )


def _texts(
    value: object, path: tuple[object, ...] = ()
) -> Iterator[tuple[tuple[object, ...], str]]:
    """Every string inside a stored configuration, with the keys and indexes that lead to it."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(key, path)
            yield from _texts(item, (*path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _texts(item, (*path, index))


def _where(path: tuple[object, ...]) -> str:
    if len(path) >= 4 and path[:2] == ("script", "steps") and isinstance(path[2], int):
        return f"in step {path[2] + 1} ({path[3]})"
    return f"in {'.'.join(map(str, path))}" if path else "in its adapter name"


def _adapter_class(name: object) -> AgentFactory:
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
