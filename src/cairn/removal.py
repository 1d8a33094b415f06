"""Removing a folder cairn made, read-only parts included.

A leaf (standard library only): the workspace layer removes half-made worktrees with it,
and the dependency cache removes entries it made read-only, without either importing the
other.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def remove_tree(folder: Path) -> None:
    """Remove a (possibly read-only) folder and everything in it; nothing if it is missing."""
    if not os.path.lexists(folder):
        return
    for path, _dirs, _files in os.walk(folder):  # never follows a symlink below `folder`
        os.chmod(path, 0o700)
    shutil.rmtree(folder)
