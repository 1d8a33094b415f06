"""Shell commands inside a workspace: an allowlisted environment, bounded output, no leftovers."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

OUTPUT_TAIL_BYTES = 64 * 1024
# Only these reach a command: never CAIRN_* (the store URL would bypass fencing) nor any secret.
_PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None
    """The exit code; negative for a signal; None when it ran out of time or was stopped."""
    output: str
    """The tail of its combined output (at most OUTPUT_TAIL_BYTES)."""
    stopped: bool = False
    """True when cairn stopped it because the runner lost the job."""
    sandboxed: bool = False
    """True when the command ran isolated (only the workspace writable, no network)."""


def command_environment(private_tmp: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a workspace command: a short allowlist and a private HOME and TMPDIR."""
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in _PASSED_THROUGH if name in source}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env |= {
        "HOME": str(private_tmp),
        "TMPDIR": str(private_tmp),
        "PYTHONDONTWRITEBYTECODE": "1",  # verification must not leave __pycache__ in the result
    }
    return env


def run_in_workspace(
    command: str,
    workspace: Path,
    *,
    timeout: float,
    should_stop: Callable[[], bool] = lambda: False,
    allow_unsandboxed: bool = False,
) -> CommandResult:
    """Run `command` with /bin/sh in `workspace`; its whole process group ends with it."""
    # Output goes to a file, not a pipe: memory stays bounded and a background child holding
    # a pipe open cannot keep the caller waiting.
    with tempfile.TemporaryFile() as output, tempfile.TemporaryDirectory(prefix="cairn-") as tmp:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=workspace,
            env=command_environment(Path(tmp)),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
        try:
            ended, stopped = _wait_unreaped(process, timeout, should_stop)
        finally:
            # Leftovers (background jobs, a timed-out tree) do not outlive the command. Only
            # while the shell is unreaped can its group id not have been reused.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
        return CommandResult(code if ended else None, _tail(output), stopped)


def _die_with_parent() -> Callable[[], None] | None:
    """A child hook so a SIGKILLed runner takes its command with it instead of orphaning it."""
    if sys.platform != "linux":
        return None
    # Loaded here, in the parent: the forked child only makes the call, it loads nothing.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return hook


def _wait_unreaped(
    process: subprocess.Popen[bytes], timeout: float, should_stop: Callable[[], bool]
) -> tuple[bool, bool]:
    """Wait for exit without reaping; (ended, stopped) — not ended on timeout or stop."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while not _has_exited(process):
        if should_stop():
            return False, True
        if time.monotonic() >= deadline:
            return False, False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True, False


def _has_exited(process: subprocess.Popen[bytes]) -> bool:
    if hasattr(os, "waitid"):
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    return process.poll() is not None  # macOS: reaping early only risks a reused group id


def _tail(output: IO[bytes]) -> str:
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - OUTPUT_TAIL_BYTES))
    return output.read().decode("utf-8", errors="replace")
