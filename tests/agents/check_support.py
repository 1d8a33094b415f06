"""`cairn agent check` through the real console script, with a runner's environment of its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CAIRN = Path(sys.executable).parent / "cairn"
TIMEOUT = 240.0


@dataclass
class CheckCli:
    """One cairn home, driven through its command line with an environment the test sets."""

    home: Path
    cwd: Path

    def __call__(
        self, *args: str, env: dict[str, str] | None = None, expect: int | None = 0
    ) -> subprocess.CompletedProcess[str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CAIRN_", "OPENAI_", "ANTHROPIC_", "PYTEST_"))
        }
        done = subprocess.run(
            [str(CAIRN), *args],
            env={**base, "CAIRN_HOME": str(self.home), "NO_COLOR": "1", "COLUMNS": "200"}
            | (env or {}),
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        shown = f"cairn {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        if expect is not None:
            assert done.returncode == expect, shown
        assert "Traceback" not in done.stderr, shown
        return done

    def check(
        self, *args: str, env: dict[str, str], expect: int
    ) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
        """`cairn agent check ARGS --json`, and the text form of the same check."""
        done = self("agent", "check", *args, "--json", env=env, expect=expect)
        return json.loads(done.stdout), done


def statuses(report: dict[str, Any]) -> dict[str, str]:
    """Each check's status by its name."""
    return {check["name"]: check["status"] for check in report["checks"]}


def by_name(report: dict[str, Any], name: str) -> dict[str, Any]:
    found = [check for check in report["checks"] if check["name"] == name]
    assert len(found) == 1, report
    return found[0]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def assert_private(text: str, *private: str) -> None:
    """No key and no local path of the test in what cairn printed."""
    for secret in private:
        assert secret not in text, f"the output holds {secret!r}:\n{text}"
