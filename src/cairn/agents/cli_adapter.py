"""What every coding-CLI adapter is: a validated spec, the runner's endpoint and key, a binary.

Claude Code, Codex and Aider differ in their module (command line, events, session file) and
in the variables they read; the rest of being a cairn agent is this class, so a new CLI is a
module and a few names.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from cairn.agents.base import Outcome, Turn
from cairn.agents.cli_agent import CliModule
from cairn.errors import UsageError
from cairn.sanitize import strip_control

if TYPE_CHECKING:
    from cairn.agents.cli_turn import CliTurn
    from cairn.config import Config


class CliAgent:
    """A coding CLI as a cairn agent: the shared CLI turn over the subclass's module."""

    name: str
    base_url_env: ClassVar[str]
    """The runner's variable naming the endpoint (the CLI's own)."""
    api_key_env: ClassVar[str]
    default_base_url: ClassVar[str]
    default_command: ClassVar[str]

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.spec = self.validate({k: v for k, v in spec.items() if k != "adapter"})
        self.base_url = base_url
        self._api_key = api_key
        self.module: CliModule = self.make_module()

    @staticmethod
    def validate(given: Mapping[str, Any]) -> dict[str, Any]:
        """The storable spec from the settings given (the subclass's own rules)."""
        raise NotImplementedError

    def make_module(self) -> CliModule:
        """The CLI's module, configured from the validated spec."""
        raise NotImplementedError

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(model={self.spec['model']!r}, base_url={self.base_url!r})"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], config: Config | None = None) -> Self:
        """Validate the spec; with the runner's `config`, take its endpoint and key as well."""
        from cairn.agents.openai_spec import checked_base_url

        if config is None:
            return cls(spec)
        environment = config.environment
        base_url = checked_base_url(
            environment.get(cls.base_url_env) or None, f"the runner's {cls.base_url_env}"
        )
        return cls(spec, base_url=base_url, api_key=environment.get(cls.api_key_env) or None)

    @classmethod
    def spec_from_argument(cls, argument: str) -> dict[str, Any]:
        """`--agent NAME[:MODEL]`: the spec with every default."""
        return cls.validate({"model": argument.strip() or None})

    def binary(self) -> str | None:
        """The binary this agent runs: its configured command, else the CLI's name on PATH."""
        command = self.spec["command"] or self.default_command
        found = shutil.which(command)
        return str(Path(found).absolute()) if found else None

    def make_turn(self, turn: Turn, endpoint: str) -> CliTurn:
        """The shared CLI turn (a CLI with its own turn rules overrides this)."""
        from cairn.agents.cli_turn import CliTurn

        return CliTurn(self.module, self.binary(), turn, endpoint, self._api_key, self.spec)

    def run_turn(self, turn: Turn) -> Outcome:
        """One turn of the CLI in the job's own session."""
        return self.make_turn(turn, self.base_url or self.default_base_url).run()


def spec_command(given: Mapping[str, Any], cli: str) -> str | None:
    """A spec's `command`: the path of the CLI's binary or its name on PATH (None: the default)."""
    command = given.get("command")
    if command is not None and (
        not isinstance(command, str) or not command.strip() or strip_control(command) != command
    ):
        raise UsageError(f"--command is the path of the {cli} binary (or its name on PATH)")
    return command


def spec_retries(given: Mapping[str, Any], default: int) -> int:
    """A spec's `max_retries`: how often the CLI retries a lost request."""
    retries = given.get("max_retries", default)
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
        raise UsageError("max_retries is a whole number from 0 to 10")
    return retries


def spec_timeout(given: Mapping[str, Any], default: float) -> float:
    """A spec's `timeout`: the seconds one turn of the CLI may take."""
    timeout = given.get("timeout", default)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 10:
        raise UsageError("timeout is a number of seconds, at least 10")
    return float(timeout)
