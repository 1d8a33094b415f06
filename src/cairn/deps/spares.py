"""Spares: an entry's layout linked ahead of need, so the next workspace gets it by a rename.

Materializing hardlinks every file and makes every folder of an entry: thousands of file
system operations for a Python environment with its bytecode, on the job's path. A process
that materialized an entry links one spare of it afterwards, off the job's path
(`DependencyCache.link_ahead`), checked file by file against the manifest like any
materialization (`cairn.deps.manifest.linked_ahead`). Its next materialization of that entry
takes the spare with one `rename`, once the lstat of every path in it still matches what was
recorded when it was made; otherwise the spare is removed and the entry linked as usual.

Spares are trusted only by the process that made them: what was recorded stays in its memory.
Each process keeps at most `KEEP` (for the entries it used last) in
`<root>/.spares/<owner>/<spare>/`, and holds an flock on `<root>/.spares/<owner>.lock` while it
lives, so `sweep` (run by `cairn cache prune`) removes the spares of processes that are gone.
A spare of an entry that was pruned or rebuilt since is never taken (its key names the ledger
row and content id) and goes when newer spares push it out, or with its process.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cairn.deps.manifest import Row, linked_ahead, still_as_made
from cairn.deps.tree import remove_tree
from cairn.store.dependency_caches import CacheRecord

KEEP = 4
SPARES = ".spares"

_Key = tuple[int, str, str]
"""(ledger row, content id, folder name) of the entry a spare was linked from."""


@dataclass(frozen=True)
class _Spare:
    container: Path
    """`<owner folder>/<random>`; the spare itself is `container/<folder name>`."""
    rows: tuple[Row, ...]


class _Pool:
    """One process's spares under one cache root."""

    def __init__(self, root: Path) -> None:
        (root / SPARES).mkdir(parents=True, exist_ok=True)
        self.lock, self.folder = _owned(root / SPARES)
        self.folder.mkdir()
        self.spares: OrderedDict[_Key, _Spare] = OrderedDict()
        self.linking: set[_Key] = set()
        self.guard = threading.Lock()
        self.pid = os.getpid()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a link ahead may still be running
            remove_tree(self.folder)
            os.unlink(self.lock.name)
        self.lock.close()


def _owned(spares: Path) -> tuple[IO[str], Path]:
    """A lock file of this process's, held until it ends; the folder it owns (not made yet).

    `sweep` may take a lock file just created, before its owner locks it, and unlink it:
    the owner then holds a lock on a file no longer there, and tries another name.
    """
    while True:
        owner = secrets.token_hex(8)
        lock = open(spares / f"{owner}.lock", "a")  # noqa: SIM115 - held while the process lives
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock.name).st_ino == os.fstat(lock.fileno()).st_ino:
                return lock, spares / owner
        lock.close()


_POOLS: dict[Path, _Pool] = {}
_POOLS_GUARD = threading.Lock()


def _pool(root: Path) -> _Pool:
    with _POOLS_GUARD:
        if root not in _POOLS:
            _POOLS[root] = _Pool(root)
        return _POOLS[root]


@atexit.register
def _close_all() -> None:
    with _POOLS_GUARD:
        for pool in _POOLS.values():
            if pool.pid == os.getpid():  # a forked child leaves its parent's spares alone
                pool.close()
        _POOLS.clear()


def _key(record: CacheRecord, name: str) -> _Key:
    return (record.id, record.content_id or "", name)


def take(root: Path, record: CacheRecord, name: str, target: Path) -> bool:
    """Move this process's spare of the entry to `target` if it is still as made."""
    pool = _POOLS.get(root)
    if pool is None:
        return False
    with pool.guard:
        spare = pool.spares.pop(_key(record, name), None)
    if spare is None:
        return False
    taken = False
    with contextlib.suppress(OSError):
        if still_as_made(spare.container, spare.rows):
            os.rename(spare.container / name, target)
            taken = True
    with contextlib.suppress(OSError):
        remove_tree(spare.container)  # what is left of it: nothing once taken
    return taken


def link_ahead(
    root: Path,
    entry: Path,
    record: CacheRecord,
    name: str,
    outside: Sequence[str],
    near: Path,
) -> bool:
    """Link a spare of `entry/<name>` for a workspace beside `near`; whether one is ready.

    None is made when one is ready or being made, or when `near` is on another file system
    (a rename could not move it there).
    """
    pool = _pool(root)
    key = _key(record, name)
    with pool.guard:
        if key in pool.spares or key in pool.linking:
            return key in pool.spares
        pool.linking.add(key)
    container = pool.folder / secrets.token_hex(4)
    rows = None
    try:
        container.mkdir()
        if os.stat(container).st_dev == os.stat(near).st_dev:
            rows = linked_ahead(entry, record, name, container, outside)
    finally:
        with pool.guard:
            pool.linking.discard(key)
            gone = [container]
            if rows is not None:
                pool.spares[key] = _Spare(container, rows)
                gone = []
                while len(pool.spares) > KEEP:  # the least recently used goes
                    gone.append(pool.spares.popitem(last=False)[1].container)
        for folder in gone:
            with contextlib.suppress(OSError):
                remove_tree(folder)
    return rows is not None


def held(root: Path) -> list[Path]:
    """The spares this process holds ready under `root`, least recently linked first."""
    pool = _POOLS.get(root)
    if pool is None:
        return []
    with pool.guard:
        return [spare.container / name for (_, _, name), spare in pool.spares.items()]


def sweep(root: Path) -> None:
    """Remove the spares of processes that are gone (their owner lock is free)."""
    folder = root / SPARES
    if not folder.is_dir():
        return
    for lock in sorted(folder.glob("*.lock")):
        with open(lock, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process still runs
            remove_tree(folder / lock.stem)
            lock.unlink()
