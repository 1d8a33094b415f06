"""A PATH on which some programs are missing, the way they are on a machine without them."""

from __future__ import annotations

import os
from pathlib import Path


def path_without(folder: Path, path: str, *missing: str) -> str:
    """A PATH of one `folder` that links every program found on `path` except `missing`."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in path.split(os.pathsep):
        found = Path(entry)
        if not entry or not found.is_dir():
            continue
        for program in found.iterdir():
            link = folder / program.name
            # The first folder of PATH wins, as it does when a shell looks a program up.
            if program.name not in missing and not link.exists() and not link.is_symlink():
                link.symlink_to(program)
    return str(folder)
