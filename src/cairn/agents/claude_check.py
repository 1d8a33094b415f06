"""`cairn agent check` for a `claude` agent: the binary, its variables, the sandbox, one turn.

The shared parts are `cli_check`'s; this module names Claude Code's binary, variables and
install hint, and bounds its retries so a check answers soon.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cairn.agents.checks import Check, failed
from cairn.agents.claude_code import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_COMMAND,
    ClaudeCode,
    ClaudeCodeAgent,
)
from cairn.agents.cli_check import CliNames, cli_agent_checks
from cairn.errors import UsageError

if TYPE_CHECKING:
    from cairn.config import Config

MAX_RETRIES = 1
"""Claude Code's retries in a check: enough for one hiccup, few enough to answer soon."""
NAMES = CliNames(
    default_command=DEFAULT_COMMAND,
    key_env=API_KEY_ENV,
    base_url_env=BASE_URL_ENV,
    default_endpoint="the Anthropic API",
    install="install Claude Code (npm install -g @anthropic-ai/claude-code), or give the "
    "agent the binary's path with --command",
)


def check_claude(spec: Mapping[str, Any], config: Config) -> list[Check]:
    """The checks of a claude agent on this runner (see `cli_check.cli_agent_checks`)."""
    try:
        agent = ClaudeCodeAgent.from_spec(spec, config)
    except UsageError as exc:
        fix = f"give the runner's {BASE_URL_ENV} a URL like https://api.anthropic.com"
        return [failed("base url", str(exc), fix)]
    module = ClaudeCode(min(MAX_RETRIES, agent.spec["max_retries"]))
    return cli_agent_checks(agent, config, NAMES, module, DEFAULT_BASE_URL)
