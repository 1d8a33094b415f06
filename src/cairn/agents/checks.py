"""`cairn agent check`: what an agent needs on this runner, each need passed or failed.

Each adapter brings one small check function (`AgentCheck`), registered in `CHECKS` by its
adapter name as `module:function`, imported only when a check runs: the openai one in
`openai_check`, Claude Code's in `claude_check`; a new CLI adds one entry. A check runs on the
runner's machine with the runner's environment (`Config.environment`, where the keys are),
takes one no-op turn against the configured endpoint, and writes nothing to cairn's store: a
check is not a job. Its report never holds a key, a token or a local path.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cairn.errors import UsageError
from cairn.sanitize import MASK, bound, strip_control

if TYPE_CHECKING:
    from cairn.config import Config

CHECK_MARKER = "cairn agent check"
"""Opens every request a check sends: a scripted server names the check's conversation by it."""
REASON_CHARS = 300
_MIN_MASKED = 6


class CheckStatus(StrEnum):
    passed = "passed"
    """The need is met."""
    failed = "failed"
    """The need is not met; `fix` says the one thing to do."""
    skipped = "skipped"
    """Not tried, because a check it depends on failed."""


@dataclass(frozen=True)
class Check:
    """One need of the agent on this runner: whether it is met, why, and what to do if not."""

    name: str
    status: CheckStatus
    reason: str
    fix: str | None = None

    def to_data(self) -> dict[str, Any]:
        """The JSON-ready form `cairn agent check --json` prints."""
        return {
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "fix": self.fix,
        }


def passed(name: str, reason: str) -> Check:
    """A need that is met."""
    return Check(name, CheckStatus.passed, reason)


def failed(name: str, reason: str, fix: str) -> Check:
    """A need that is not met, and the one thing to do about it."""
    return Check(name, CheckStatus.failed, reason, fix)


def skipped(name: str, because: str) -> Check:
    """A need that was not tried, because an earlier one failed."""
    return Check(name, CheckStatus.skipped, f"not tried: {because}")


@dataclass(frozen=True)
class CheckReport:
    """Every check of one agent, in the order they ran."""

    adapter: str
    model: str | None
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every need is met (the command's exit code 0)."""
        return all(check.status is CheckStatus.passed for check in self.checks)

    def to_data(self) -> dict[str, Any]:
        """The JSON-ready form `cairn agent check --json` prints."""
        return {
            "adapter": self.adapter,
            "model": self.model,
            "ok": self.ok,
            "checks": [check.to_data() for check in self.checks],
        }


AgentCheck = Callable[[Mapping[str, Any], "Config"], Sequence[Check]]
"""An adapter's check: its stored spec and the runner's configuration, to the checks it ran."""

CHECKS: dict[str, str] = {
    "openai": "cairn.agents.openai_check:check_openai",
    "claude": "cairn.agents.claude_check:check_claude",
    "codex": "cairn.agents.codex_check:check_codex",
    "aider": "cairn.agents.aider_check:check_aider",
}
"""Adapter name to its check function, as `module:function` (imported when a check runs)."""


def check_agent(spec: Mapping[str, Any], config: Config) -> CheckReport:
    """Run the check of the adapter `spec` names, with the runner's `config`; never raises for
    a need that is not met (that is a failed check), only for a spec no check exists for."""
    adapter = spec.get("adapter")
    target = CHECKS.get(adapter) if isinstance(adapter, str) else None
    if target is None or not isinstance(adapter, str):
        raise UsageError(
            "cairn has no check for this agent's adapter; adapters with one: "
            f"{', '.join(sorted(CHECKS))}"
        )
    module, function = target.split(":")
    run: AgentCheck = getattr(importlib.import_module(module), function)
    secrets = _secrets(config)
    checks = tuple(_masked(check, secrets) for check in run(spec, config))
    model = spec.get("model")
    return CheckReport(adapter, model if isinstance(model, str) else None, checks)


def _secrets(config: Config) -> list[str]:
    """Every value of the runner's environment whose name says it is a credential."""
    from cairn.sanitize import is_secret_name

    return [
        value
        for name, value in config.environment.items()
        if is_secret_name(name) and len(value) >= _MIN_MASKED
    ]


def _masked(check: Check, secrets: Sequence[str]) -> Check:
    """The check with its texts masked, whatever an adapter's check put in them."""
    from cairn.sanitize import mask_secret_shapes

    def clean(text: str) -> str:
        text = strip_control(text)
        for secret in secrets:
            text = text.replace(secret, MASK)
        return bound(mask_secret_shapes(text), REASON_CHARS)

    fix = None if check.fix is None else clean(check.fix)
    return Check(check.name, check.status, clean(check.reason), fix)
