"""`cairn agent check` for a `claude` agent: the binary, the variables, the sandbox, one turn.

The turn is a job's turn without the job: the real CLI, through the shared CLI turn
(`cli_turn`), in cairn's sandbox, in a throw-away empty git workspace with a throw-away state
folder, against the runner's endpoint with the runner's key. Nothing of it is saved: its state
is discarded and both folders are deleted when the check ends.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents.base import Outcome, OutcomeKind, Turn
from cairn.agents.checks import CHECK_MARKER, Check, CheckStatus, failed, passed, skipped
from cairn.agents.claude_code import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_COMMAND,
    ClaudeCode,
    ClaudeCodeAgent,
)
from cairn.errors import UsageError
from cairn.sanitize import user_sanitizer
from cairn.workspace import commands

if TYPE_CHECKING:
    from cairn.config import Config

REQUEST = (
    f"This is `{CHECK_MARKER}`, a connectivity test. Reply with the single word OK; use no tool."
)
TURN_TIMEOUT = 180.0
"""Seconds the check's turn may take (a job's turn may take an hour)."""
MAX_RETRIES = 1
"""Claude Code's retries in a check: enough for one hiccup, few enough to answer soon."""
_VERSION_TIMEOUT = 30.0
_VERSION = re.compile(r"\d+\.\d+\.\d+[\w.+-]*")
_INSTALL = (
    "install Claude Code (npm install -g @anthropic-ai/claude-code), or give the agent "
    "the binary's path with --command"
)


def check_claude(spec: Mapping[str, Any], config: Config) -> list[Check]:
    """The checks of a claude agent on this runner: binary and version, key, endpoint,
    bubblewrap, socat, then one no-op turn (when what it needs is there)."""
    environment = config.environment
    key = environment.get(API_KEY_ENV) or None
    try:
        agent = ClaudeCodeAgent.from_spec(spec, config)
    except UsageError as exc:
        fix = f"give the runner's {BASE_URL_ENV} a URL like https://api.anthropic.com"
        return [failed("base url", str(exc), fix)]
    binary = agent.binary()
    checks = [
        _binary(agent.spec["command"], binary),
        _key(key),
        _endpoint(agent.base_url),
        _bubblewrap(),
        _socat(),
    ]
    needed = ("binary", "key set", "bubblewrap")
    missing = [c.name for c in checks if c.name in needed and c.status is CheckStatus.failed]
    if missing or binary is None:
        return [*checks, skipped("turn", f"needs what failed above ({', '.join(missing)})")]
    return [*checks, *_turn(agent, binary, key, config)]


def _binary(command: str | None, binary: str | None) -> Check:
    """Found, and its version; shown by name, never by path."""
    name = Path(command or DEFAULT_COMMAND).name
    where = "its --command" if command else "the runner's PATH"
    if binary is None:
        return failed("binary", f"{name} is not found on {where}", _INSTALL)
    version = _version(binary)
    if version is None:
        return failed(
            "binary",
            f"{name} (from {where}) does not say its version: it may not be Claude Code",
            _INSTALL,
        )
    return passed("binary", f"{name} {version} (from {where})")


def _version(binary: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="cairn-check-") as home:
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "CLAUDE_CONFIG_DIR": home,
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        try:
            done = subprocess.run(
                [binary, "--version"],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=_VERSION_TIMEOUT,
                stdin=subprocess.DEVNULL,
                env=environment,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    found = _VERSION.search(done.stdout) if done.returncode == 0 else None
    return found.group(0)[:40] if found else None


def _key(key: str | None) -> Check:
    if key is None:
        return failed(
            "key set",
            f"{API_KEY_ENV} is not set in the runner's environment",
            f"set {API_KEY_ENV} to the endpoint's API key where the runner runs",
        )
    return passed("key set", f"{API_KEY_ENV} is set (its value is never shown)")


def _endpoint(base_url: str | None) -> Check:
    if base_url is None:
        return passed("base url", f"{BASE_URL_ENV} is not set: the Anthropic API")
    # Named, not shown: the runner's environment values are masked in everything cairn prints.
    return passed("base url", f"{BASE_URL_ENV} is set")


def _bubblewrap() -> Check:
    if shutil.which("bwrap") is None:
        return failed(
            "bubblewrap",
            "bubblewrap is not installed: cairn runs Claude Code in its sandbox",
            "install bubblewrap (for example `apt-get install bubblewrap`)",
        )
    problem = commands.sandbox_problem()
    if problem is not None:
        return failed("bubblewrap", "bubblewrap cannot start cairn's sandbox here", problem)
    return passed("bubblewrap", "cairn's sandbox starts")


def _socat() -> Check:
    if shutil.which("socat") is None:
        return failed(
            "socat",
            "socat is not installed: the sandbox reaches its model endpoint through it",
            "install socat (for example `apt-get install socat`)",
        )
    return passed("socat", "found (the sandbox's bridge to its model endpoint)")


def _turn(agent: ClaudeCodeAgent, binary: str, key: str | None, config: Config) -> list[Check]:
    """One no-op turn of the real CLI, in throw-away folders; nothing of it is kept."""
    from cairn.agents.cli_turn import CliTurn

    spec = {**agent.spec, "timeout": TURN_TIMEOUT}
    endpoint = agent.base_url or DEFAULT_BASE_URL
    where = f"the endpoint in {BASE_URL_ENV}" if agent.base_url else "the Anthropic API"
    with tempfile.TemporaryDirectory(prefix="cairn-check-") as tmp:
        root = Path(tmp).resolve()
        workspace = root / "workspace"
        workspace.mkdir()
        subprocess.run(["git", "init", "-q", str(workspace)], check=True, capture_output=True)
        turn = Turn(
            job_id=0,
            workspace=workspace,
            request=REQUEST,
            state=None,
            save_state=_discard,
            workspace_id=lambda: _content_id(workspace),
            hidden_paths=(config.home,),
            mask=user_sanitizer(config).mask,
            installation_id=CHECK_MARKER,
            agent_home=root / "state",
        )
        cli = CliTurn(
            ClaudeCode(min(MAX_RETRIES, spec["max_retries"])), binary, turn, endpoint, key, spec
        )
        outcome = cli.run()
    status = cli.report.final.get("api_error_status") if cli.report and cli.report.final else None
    return _read(outcome, status, where)


def _read(outcome: Outcome, status: object, where: str) -> list[Check]:
    """The turn's outcome as three checks: the endpoint answered, the key, the turn."""
    if status in (401, 403):
        return [
            passed("endpoint", f"{where} answers"),
            failed(
                "key",
                f"the endpoint refused the key in {API_KEY_ENV} (HTTP {status})",
                f"set {API_KEY_ENV} to a key the endpoint accepts",
            ),
            skipped("turn", "the endpoint refused the key"),
        ]
    if outcome.kind is OutcomeKind.interrupted:
        return [
            failed(
                "endpoint",
                f"nothing answered at {where}: Claude Code gave up on the connection",
                f"start the model server, or set the runner's {BASE_URL_ENV} to one that runs",
            ),
            skipped("key", "the endpoint did not answer"),
            skipped("turn", "the endpoint did not answer"),
        ]
    if outcome.kind is OutcomeKind.failed:
        return [
            passed("key", "no refusal seen"),
            failed(
                "turn",
                outcome.diagnosis or "the turn failed",
                "run the check again; if it fails the same way, check the model server's log",
            ),
        ]
    return [
        passed("endpoint", f"{where} answers"),
        passed("key", "the endpoint accepted it"),
        passed("turn", "a no-op turn ran in cairn's sandbox and the model answered"),
    ]


def _discard(state: dict[str, Any], outcome: Outcome | None = None) -> None:
    """A check is not a job: its turn's state is not saved anywhere."""
    del state, outcome


def _content_id(workspace: Path) -> str:
    """What the throw-away workspace holds, to tell whether the turn changed it."""
    digest = hashlib.sha256()
    for path in sorted(workspace.rglob("*")):
        relative = path.relative_to(workspace)
        if relative.parts[0] == ".git" or not path.is_file():
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
