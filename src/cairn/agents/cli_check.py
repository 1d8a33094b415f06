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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents.base import Outcome, OutcomeKind, Turn
from cairn.agents.checks import CHECK_MARKER, Check, CheckStatus, failed, passed, skipped
from cairn.sanitize import user_sanitizer
from cairn.workspace import commands

if TYPE_CHECKING:
    from cairn.agents.cli_agent import CliModule
    from cairn.config import Config

REQUEST = (
    f"This is `{CHECK_MARKER}`, a connectivity test. Reply with the single word OK; use no tool."
)
TURN_TIMEOUT = 180.0
"""Seconds the check's turn may take (a job's turn may take an hour)."""
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
) -> tuple[Outcome, object]:
    """One turn of the real CLI in throw-away folders; its outcome, and the HTTP status the
    endpoint refused it with (None when it did not)."""
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
        cli = CliTurn(module, binary, turn, endpoint, key, checked)
        outcome = cli.run()
    final = cli.report.final if cli.report is not None else None
    return outcome, final.get("api_error_status") if final else None


def turn_checks(
    outcome: Outcome, status: object, where: str, key_env: str, base_url_env: str
) -> list[Check]:
    """The no-op turn as three checks: the endpoint answered, the key, the turn."""
    if status in (401, 403):
        return [
            passed("endpoint", f"{where} answers"),
            failed(
                "key",
                f"the endpoint refused the key in {key_env} (HTTP {status})",
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
