"""Reading one file of a folder that someone else writes, never through a symlink at its name.

A workspace is written by an agent: a symlink, a FIFO or a device may sit where a file is
expected. The file is opened with O_NOFOLLOW (a symlink at its name is refused, not
followed) and O_NONBLOCK (a FIFO cannot hang the reader), and the caller judges what was
opened, from its stat, before a byte is read.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_no_follow(
    name: str | Path,
    *,
    dir_fd: int | None = None,
    symlink_error: Callable[[], Exception],
    check: Callable[[os.stat_result], None],
    limit: int = -1,
) -> bytes | None:
    """The bytes of `name` (relative to `dir_fd` when given), or None when there is none.

    Raises `symlink_error()` when `name` is a symlink, whatever `check` raises for the opened
    file's stat, and reads at most `limit` bytes (all of them when negative).
    """
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_error() from None
        raise
    with os.fdopen(fd, "rb") as handle:
        check(os.fstat(handle.fileno()))
        return handle.read(limit)
