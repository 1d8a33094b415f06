"""`cairn agent check` for a `claude` agent: the binary, its variables, the sandbox, one turn.

The shared parts are `cli_check`'s; this module names Claude Code's binary, variables and
install hint, and bounds its retries so a check answers soon.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cairn.agents import cli_check
from cairn.agents.checks import Check, failed, passed
from cairn.agents.claude_code import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_COMMAND,
    ClaudeCode,
    ClaudeCodeAgent,
)
from cairn.errors import UsageError

if TYPE_CHECKING:
    from cairn.config import Config

MAX_RETRIES = 1
"""Claude Code's retries in a check: enough for one hiccup, few enough to answer soon."""
INSTALL = (
    "install Claude Code (npm install -g @anthropic-ai/claude-code), or give the agent "
    "the binary's path with --command"
)


def check_claude(spec: Mapping[str, Any], config: Config) -> list[Check]:
    """The checks of a claude agent on this runner: binary and version, key, base URL,
    bubblewrap, socat, then one no-op turn (when what it needs is there)."""
    key = config.environment.get(API_KEY_ENV) or None
    try:
        agent = ClaudeCodeAgent.from_spec(spec, config)
    except UsageError as exc:
        fix = f"give the runner's {BASE_URL_ENV} a URL like https://api.anthropic.com"
        return [failed("base url", str(exc), fix)]
    binary = agent.binary()
    checks = [
        cli_check.binary_check(agent.spec["command"], DEFAULT_COMMAND, binary, INSTALL),
        cli_check.key_check(API_KEY_ENV, key),
        # Named, not shown: the runner's environment values are masked in all cairn prints.
        passed("base url", f"{BASE_URL_ENV} is set")
        if agent.base_url
        else passed("base url", f"{BASE_URL_ENV} is not set: the Anthropic API"),
        *cli_check.sandbox_checks(),
    ]
    skipped_turn = cli_check.missing_for_turn(checks)
    if skipped_turn is not None or binary is None:
        return [*checks, *([skipped_turn] if skipped_turn else [])]
    module = ClaudeCode(min(MAX_RETRIES, agent.spec["max_retries"]))
    endpoint = agent.base_url or DEFAULT_BASE_URL
    outcome, status = cli_check.no_op_turn(module, binary, endpoint, key, agent.spec, config)
    where = f"the endpoint in {BASE_URL_ENV}" if agent.base_url else "the Anthropic API"
    return [*checks, *cli_check.turn_checks(outcome, status, where, API_KEY_ENV, BASE_URL_ENV)]
