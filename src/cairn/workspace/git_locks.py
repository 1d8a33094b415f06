"""Lock files a killed git left behind: waited for while young, removed once stale.

git takes a lock by creating `<file>.lock` and lets go by renaming or deleting it; SIGKILL
skips that, and every later git that needs the file refuses to run while the lock is there.
A live git holds one for moments, so a lock is cleared once it is old enough that no live
git can still hold it.
"""

from __future__ import annotations

import contextlib
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
    """
    seen: dict[tuple[Path, int], float] = {}
    removed: list[str] = []
    while True:
        wait = 0.0
        with held():
            for lock in locks:
                try:
                    status = lock.lstat()
                except (FileNotFoundError, NotADirectoryError):
                    continue  # none there (or a file where git would need a folder)
                if stat.S_ISDIR(status.st_mode):
                    continue  # not a lock git took (and nothing `unlink` could remove)
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
