"""What every coding CLI's `cairn agent check` shares: the binary, the sandbox, one no-op turn.

A CLI module's check (`claude_check`; Codex CLI's and Aider's next) names its binary, its
variables and its install hint, and calls these: `binary_check` (found, and its version,
shown by name, never by path), `sandbox_checks` (bubblewrap starts cairn's sandbox, socat
for its network bridge), `no_op_turn` (the real CLI through the shared CLI turn, in cairn's
sandbox, in a throw-away empty git workspace and state folder; nothing of it is kept) and
`turn_checks` (that turn read as: the endpoint answered, the key was accepted, the turn ran).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents.base import Outcome, OutcomeKind, Turn
from cairn.agents.checks import CHECK_MARKER, Check, CheckStatus, failed, passed, skipped
from cairn.sanitize import user_sanitizer
from cairn.workspace import commands

if TYPE_CHECKING:
    from cairn.agents.cli_agent import CliModule
    from cairn.agents.cli_turn import CliTurn
    from cairn.config import Config

REQUEST = (
    f"This is `{CHECK_MARKER}`, a connectivity test. Reply with the single word OK; use no tool."
)
TURN_TIMEOUT = 180.0
"""Seconds the check's turn may take (a job's turn may take an hour)."""
KEY_REFUSED = "refused the key"
"""How every CLI module words a refused key in its failure (a CLI may report no HTTP status)."""
_VERSION_TIMEOUT = 30.0
_VERSION = re.compile(r"\d+\.\d+\.\d+[\w.+-]*")


def binary_check(command: str | None, default: str, binary: str | None, install: str) -> Check:
    """The CLI's binary is found (from `--command`, else `default` on PATH) and says its version."""
    name = Path(command or default).name
    where = "its --command" if command else "the runner's PATH"
    if binary is None:
        return failed("binary", f"{name} is not found on {where}", install)
    version = cli_version(binary)
    if version is None:
        return failed("binary", f"{name} (from {where}) does not say its version", install)
    return passed("binary", f"{name} {version} (from {where})")


def cli_version(binary: str) -> str | None:
    """`BINARY --version`'s version number, run with a throw-away home and nothing else set."""
    with tempfile.TemporaryDirectory(prefix="cairn-check-") as home:
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "CLAUDE_CONFIG_DIR": home,
            "CODEX_HOME": home,
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


def key_check(variable: str, key: str | None) -> Check:
    """The runner's key variable is set; its value is never shown."""
    if key is None:
        return failed(
            "key set",
            f"{variable} is not set in the runner's environment",
            f"set {variable} to the endpoint's API key where the runner runs",
        )
    return passed("key set", f"{variable} is set (its value is never shown)")


def sandbox_checks() -> list[Check]:
    """bubblewrap starts cairn's sandbox; socat, its bridge to the model endpoint, is there."""
    if shutil.which("bwrap") is None:
        bubblewrap = failed(
            "bubblewrap",
            "bubblewrap is not installed: cairn runs coding CLIs in its sandbox",
            "install bubblewrap (for example `apt-get install bubblewrap`)",
        )
    else:
        problem = commands.sandbox_problem()
        bubblewrap = (
            passed("bubblewrap", "cairn's sandbox starts")
            if problem is None
            else failed("bubblewrap", "bubblewrap cannot start cairn's sandbox here", problem)
        )
    if shutil.which("socat") is None:
        socat = failed(
            "socat",
            "socat is not installed: the sandbox reaches its model endpoint through it",
            "install socat (for example `apt-get install socat`)",
        )
    else:
        socat = passed("socat", "found (the sandbox's bridge to its model endpoint)")
    return [bubblewrap, socat]


def missing_for_turn(checks: Sequence[Check]) -> Check | None:
    """The skipped turn, when the binary, the key or the sandbox failed; else None."""
    needed = ("binary", "key set", "bubblewrap")
    missing = [c.name for c in checks if c.name in needed and c.status is CheckStatus.failed]
    if not missing:
        return None
    return skipped("turn", f"needs what failed above ({', '.join(missing)})")


def no_op_turn(
    module: CliModule,
    binary: str,
    endpoint: str,
    key: str | None,
    spec: Mapping[str, Any],
    config: Config,
    turn_class: type[CliTurn] | None = None,
) -> tuple[Outcome, object]:
    """One turn of the real CLI in throw-away folders (through `turn_class`, the shared
    CliTurn unless the CLI has its own); its outcome, and the HTTP status the endpoint refused
    it with (None when it did not)."""
    from cairn.agents.cli_turn import CliTurn

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
        checked = {**spec, "timeout": TURN_TIMEOUT}
        cli = (turn_class or CliTurn)(module, binary, turn, endpoint, key, checked)
        outcome = cli.run()
    final = cli.report.final if cli.report is not None else None
    return outcome, final.get("api_error_status") if final else None


def turn_checks(
    outcome: Outcome, status: object, where: str, key_env: str, base_url_env: str
) -> list[Check]:
    """The no-op turn as three checks: the endpoint answered, the key, the turn."""
    refused = outcome.kind is OutcomeKind.failed and KEY_REFUSED in (outcome.diagnosis or "")
    if status in (401, 403) or refused:
        shown = f" (HTTP {status})" if status in (401, 403) else ""
        return [
            passed("endpoint", f"{where} answers"),
            failed(
                "key",
                f"the endpoint refused the key in {key_env}{shown}",
                f"set {key_env} to a key the endpoint accepts",
            ),
            skipped("turn", "the endpoint refused the key"),
        ]
    if outcome.kind is OutcomeKind.interrupted:
        return [
            failed(
                "endpoint",
                f"nothing answered at {where}: the CLI gave up on the connection",
                f"start the model server, or set the runner's {base_url_env} to one that runs",
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


@dataclass(frozen=True)
class CliNames:
    """What a CLI's check names: its binary, its variables, its install hint, its default."""

    default_command: str
    key_env: str
    base_url_env: str
    default_endpoint: str
    """The endpoint used when `base_url_env` is unset, as a person reads it."""
    install: str


def cli_agent_checks(
    agent: Any,
    config: Config,
    names: CliNames,
    module: CliModule,
    default_base_url: str,
    turn_class: type[CliTurn] | None = None,
) -> list[Check]:
    """Every check of a CLI agent (built with the runner's config): binary and version, key,
    base URL, bubblewrap, socat, then one no-op turn when what it needs is there."""
    key = config.environment.get(names.key_env) or None
    binary: str | None = agent.binary()
    base_url: str | None = agent.base_url
    checks = [
        binary_check(agent.spec["command"], names.default_command, binary, names.install),
        key_check(names.key_env, key),
        # Named, not shown: the runner's environment values are masked in all cairn prints.
        passed("base url", f"{names.base_url_env} is set")
        if base_url
        else passed("base url", f"{names.base_url_env} is not set: {names.default_endpoint}"),
        *sandbox_checks(),
    ]
    skipped_turn = missing_for_turn(checks)
    if skipped_turn is not None or binary is None:
        return [*checks, *([skipped_turn] if skipped_turn else [])]
    endpoint = base_url or default_base_url
    outcome, status = no_op_turn(module, binary, endpoint, key, agent.spec, config, turn_class)
    where = f"the endpoint in {names.base_url_env}" if base_url else names.default_endpoint
    return [*checks, *turn_checks(outcome, status, where, names.key_env, names.base_url_env)]
