"""`cairn agent check` for an `aider` agent: the binary, its variables, the sandbox, one turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cairn.agents.aider_cli import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_COMMAND,
    AiderAgent,
    AiderTurn,
)
from cairn.agents.checks import Check, failed
from cairn.agents.cli_check import CliNames, cli_agent_checks
from cairn.errors import UsageError

if TYPE_CHECKING:
    from cairn.config import Config

NAMES = CliNames(
    default_command=DEFAULT_COMMAND,
    key_env=API_KEY_ENV,
    base_url_env=BASE_URL_ENV,
    default_endpoint="the OpenAI API",
    install="install Aider (pipx install aider-chat), or give the agent the binary's path "
    "with --command",
)


def check_aider(spec: Mapping[str, Any], config: Config) -> list[Check]:
    """The checks of an aider agent on this runner (see `cli_check.cli_agent_checks`)."""
    try:
        agent = AiderAgent.from_spec(spec, config)
    except UsageError as exc:
        fix = f"give the runner's {BASE_URL_ENV} a URL like http://localhost:8000/v1"
        return [failed("base url", str(exc), fix)]
    return cli_agent_checks(agent, config, NAMES, agent.module, DEFAULT_BASE_URL, AiderTurn)
