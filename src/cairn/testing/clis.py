"""The real coding CLIs for tests: pinned versions from their registries, cached between runs.

Each CLI is installed once per version into `~/.cache/cairn-test-clis/<name>-<version>`
(`CAIRN_TEST_CLIS` moves the cache) with the ordinary client (`npm install --prefix`), so a
test run after the first costs nothing. An install that cannot happen (no npm, no registry)
is reported as a reason; the pytest plugin skips on it, or fails under CAIRN_REQUIRE_CLIS=1
(set in CI, where a skipped CLI test would hide a missing install).
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
