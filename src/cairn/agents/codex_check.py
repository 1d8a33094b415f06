"""`cairn agent check` for a `codex` agent: the binary, its variables, the sandbox, one turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cairn.agents.checks import Check, failed
from cairn.agents.cli_check import CliNames, cli_agent_checks
from cairn.agents.codex_cli import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_COMMAND,
    CodexCli,
    CodexCliAgent,
)
from cairn.errors import UsageError

if TYPE_CHECKING:
    from cairn.config import Config

NAMES = CliNames(
    default_command=DEFAULT_COMMAND,
    key_env=API_KEY_ENV,
    base_url_env=BASE_URL_ENV,
    default_endpoint="the OpenAI API",
    install="install Codex CLI (npm install -g @openai/codex), or give the agent the "
    "binary's path with --command",
)


def check_codex(spec: Mapping[str, Any], config: Config) -> list[Check]:
    """The checks of a codex agent on this runner (see `cli_check.cli_agent_checks`)."""
    try:
        agent = CodexCliAgent.from_spec(spec, config)
    except UsageError as exc:
        fix = f"give the runner's {BASE_URL_ENV} a URL like http://localhost:8000/v1"
        return [failed("base url", str(exc), fix)]
    module = CodexCli(min(1, agent.spec["max_retries"]))
    return cli_agent_checks(agent, config, NAMES, module, DEFAULT_BASE_URL)
