"""Host-wide locks: flock on a file or an open folder, shared or exclusive, waiting or not.

flock locks belong to an open file description: two descriptors of one file exclude each
other even within one process, and closing the descriptor releases the lock (also when the
process dies, so a crashed holder never leaves a lock behind). `ReentrantLock` keeps one
descriptor per file per process for callers that nest.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

__all__ = ["ReentrantLock", "flock", "locked"]

_FILE_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def flock(fd: int, *, shared: bool = False, wait: bool = True) -> bool:
    """Lock an open descriptor; False when `wait` is off and another holder has it."""
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        fcntl.flock(fd, mode if wait else mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def locked(path: Path, *, shared: bool = False, wait: bool = True) -> Iterator[bool]:
    """Hold an flock on `path` (created, with its folder) for the block; whether it was got.

    With `wait` off the block runs at once, told False when another holder has the lock.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _FILE_FLAGS, 0o600)
    try:
        yield flock(fd, shared=shared, wait=wait)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


class ReentrantLock:
    """An exclusive flock on one file, re-entrant for the thread that holds it.

    `ReentrantLock.of(path)` is the one instance per file in this process: two instances
    would hold two descriptors, and block each other.
    """

    _instances: ClassVar[dict[str, ReentrantLock]] = {}
    _instances_guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @classmethod
    def of(cls, path: Path) -> ReentrantLock:
        """This process's lock on `path`."""
        key = os.path.abspath(path)
        with cls._instances_guard:
            return cls._instances.setdefault(key, cls(Path(key)))

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block, waiting for other processes (and threads) to let go."""
        with self._thread_lock:
            if self._depth == 0:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, _FILE_FLAGS, 0o600)
                try:
                    flock(fd)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
