"""The workspace boundary: every path an agent names must resolve inside its worktree."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from cairn.errors import BoundaryError


def resolve_inside(root: Path, relative: str) -> Path:
    """Resolve `relative` against `root`, refusing anything that would leave it or touch `.git`.

    Checked on the resolved path at the time of use, so a symlink planted earlier cannot
    redirect a later write outside the workspace.
    """
    if not relative or "\0" in relative:
        raise BoundaryError("the agent named an empty or invalid path")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or Path(relative).is_absolute():
        raise BoundaryError(
            f"the agent named an absolute path ({_shown(relative)}); "
            "only paths inside the workspace are allowed"
        )
    if ".." in pure.parts:
        raise BoundaryError(
            f"the agent named a path that climbs out of the workspace ({_shown(relative)})"
        )
    if pure.parts and pure.parts[0].casefold() == ".git":
        raise BoundaryError(
            "the agent tried to touch the repository's .git folder, which is off limits"
        )
    root = root.resolve()
    try:
        target = (root / pure).resolve()
    except (OSError, RuntimeError):
        # A symlink loop: Python 3.11 raises RuntimeError, with the absolute path in its message.
        raise BoundaryError(f"the path {_shown(relative)} goes through a symlink loop") from None
    if target != root and root not in target.parents:
        raise BoundaryError(
            f"the path {_shown(relative)} leads outside the workspace through a symlink"
        )
    inside = target.relative_to(root).parts
    if not inside or inside[0].casefold() == ".git":
        raise BoundaryError(
            "the agent tried to touch the repository's .git folder, which is off limits"
        )
    return target


def _shown(relative: str) -> str:
    # Agent-supplied paths may themselves be absolute local paths; show only the last part.
    name = os.path.basename(relative.rstrip("/")) or "?"
    return f"…/{name}" if relative.startswith("/") else relative[:80]
