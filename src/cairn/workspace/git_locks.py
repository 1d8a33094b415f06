"""Lock files a killed git left behind: waited for while young, removed once stale.

git takes a lock by creating `<file>.lock` and lets go by renaming or deleting it; SIGKILL
skips that, and every later git that needs the file refuses to run while the lock is there.
A live git holds one for moments, so a lock is cleared once it is old enough that no live
git can still hold it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

DEAD_AFTER = 5.0
"""Seconds after which a lock that live gits hold for moments only counts as a dead git's:
on the mirror's shared files (`Mirror.clear_dead_lock`) and on cairn's hidden refs in a
local repository (`delivery`)."""


def clear_stale(
    locks: Sequence[Path],
    older_than: float,
    *,
    held: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
    stop: Callable[[], bool] = lambda: False,
) -> list[str]:
    """Remove each of `locks` once it is `older_than` seconds old; the names of those removed.

    A younger lock is waited for until it is gone or that old. Its age runs from its mtime or
    from when it was first seen here, whichever is earlier: a clock set back (an mtime in the
    future) never makes the wait longer than `older_than`, while a new lock at the same path
    (another file) starts again. Each look and removal is made holding `held()`; the waiting
    is not. Stops waiting once `stop()` answers True.

    Almost always there is no lock at all: a first look without `held()` says so, and the
    lock is not taken (runners would queue on the mirror's lock for it). A dead git's lock
    is there whether or not `held()` is, and a live git's is not for this call to clear.
    """
    if all(_lock_status(lock) is None for lock in locks):
        return []
    seen: dict[tuple[Path, int], float] = {}
    removed: list[str] = []
    while True:
        wait = 0.0
        with held():
            for lock in locks:
                status = _lock_status(lock)
                if status is None:
                    continue
                first = seen.setdefault((lock, status.st_ino), time.monotonic())
                age = max(time.time() - status.st_mtime, time.monotonic() - first)
                if age >= older_than:
                    lock.unlink(missing_ok=True)
                    removed.append(lock.name)
                else:
                    wait = max(wait, older_than - age)
        if not wait or stop():
            return removed
        time.sleep(min(wait, 0.2))


def _lock_status(path: Path) -> os.stat_result | None:
    """The lock file at `path`, as lstat sees it; None when there is none."""
    try:
        status = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None  # none there (or a file where git would need a folder)
    # A folder is not a lock git took (and nothing `unlink` could remove).
    return None if stat.S_ISDIR(status.st_mode) else status
