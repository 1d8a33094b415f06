"""Plain git for assertions: no cairn hardening, so tests see what a person's git would."""

from __future__ import annotations

import subprocess
from pathlib import Path


def plain_git(cwd: Path, *args: str) -> str:
    """Run `git args` in `cwd` and return its stdout without the trailing newline."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.removesuffix("\n")
