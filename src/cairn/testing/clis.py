"""The real coding CLIs for tests: pinned versions from their registries, cached between runs.

Each CLI is installed once per version into `~/.cache/cairn-test-clis/<name>-<version>`
(`CAIRN_TEST_CLIS` moves the cache) with the ordinary client (`npm install --prefix`; for a
PyPI CLI, `python -m venv` and that venv's pip), so a test run after the first costs
nothing. An install that cannot happen (no npm, no registry) is reported as a reason; the
pytest plugin skips on it, or fails under CAIRN_REQUIRE_CLIS=1 (set in CI, where a skipped
CLI test would hide a missing install).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REQUIRE_CLIS = "CAIRN_REQUIRE_CLIS"
CACHE_ENV = "CAIRN_TEST_CLIS"
_INSTALL_TIMEOUT = 900.0


@dataclass(frozen=True)
class NpmCli:
    """A CLI published on npm: its package, pinned version and the command it installs."""

    name: str
    package: str
    version: str
    command: str


CLAUDE_CODE = NpmCli("claude", "@anthropic-ai/claude-code", "2.1.332", "claude")
"""The Claude Code version cairn's tests drive (its stream-json and session files)."""
CODEX = NpmCli("codex", "@openai/codex", "0.171.0", "codex")
"""The Codex CLI version cairn's tests drive (its `--json` events, config keys, rollouts)."""


def cache_root() -> Path:
    """Where installed test CLIs are kept between runs."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "cairn-test-clis"


def installed(cli: NpmCli, root: Path | None = None) -> Path | str:
    """The CLI's binary, installed now if missing; or why it cannot be (a sentence)."""
    folder = (root or cache_root()) / f"{cli.name}-{cli.version}"
    binary = folder / "node_modules" / ".bin" / cli.command
    if _runs(binary):
        return binary
    npm = shutil.which("npm")
    if npm is None:
        return f"npm is not installed, so {cli.package}@{cli.version} cannot be installed"
    folder.mkdir(parents=True, exist_ok=True)
    argv = [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(
            [*argv, f"{cli.package}@{cli.version}"],
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"installing {cli.package}@{cli.version} failed: {type(exc).__name__}"
    if done.returncode != 0 or not _runs(binary):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return f"installing {cli.package}@{cli.version} failed: {last}"
    return binary


def _runs(binary: Path) -> bool:
    if not binary.exists():
        return False
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class PypiCli:
    """A CLI published on PyPI: its distribution, pinned version and the command it installs."""

    name: str
    package: str
    version: str
    command: str


AIDER = PypiCli("aider", "aider-chat", "0.86.2", "aider")
"""The Aider version cairn's tests drive (its output lines and retry behaviour)."""


def installed_pypi(cli: PypiCli, root: Path | None = None) -> Path | str:
    """The CLI's binary in its own cached venv, installed now if missing; or why it cannot be.

    A venv cannot move (its scripts name their interpreter's path), so it is built where it
    stays, and a half-built one (an install cut off) is built again from scratch.
    """
    folder = (root or cache_root()) / f"{cli.name}-{cli.version}"
    binary = folder / "bin" / cli.command
    if _runs(binary):
        return binary
    python = shutil.which("python3") or shutil.which("python")
    if python is None:
        return f"no python3 on PATH, so {cli.package}=={cli.version} cannot be installed"
    shutil.rmtree(folder, ignore_errors=True)
    steps = [
        [python, "-m", "venv", str(folder)],
        [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", f"{cli.package}=={cli.version}"],
    ]  # fmt: skip
    for argv in steps:
        problem = _step(argv, f"{cli.package}=={cli.version}")
        if problem is not None:
            return problem
    return binary if _runs(binary) else f"installing {cli.package}=={cli.version} failed"


def _step(argv: list[str], label: str) -> str | None:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"installing {label} failed: {type(exc).__name__}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return f"installing {label} failed: {last}"
    return None
