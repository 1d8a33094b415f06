"""Spares: an entry's layout linked ahead of need, so the next workspace gets it by a rename.

Materializing hardlinks every file and makes every folder of an entry: thousands of file
system operations for a Python environment with its bytecode, on the job's path. A process
that materialized an entry links one spare of it afterwards, off the job's path
(`DependencyCache.link_ahead`), checked against the manifest like any materialization and
recorded path by path (`cairn.deps.manifest.linked_ahead`). Its next materialization of that
entry takes the spare with one `rename`, once the entry's folders and every path of the spare
still have the lstat recorded (folders and links their ctime too, which no `utime` resets);
otherwise the spare is removed and the entry linked as usual, which quarantines a changed one.

Spares are trusted only by the process that made them: what was recorded stays in its memory.
Each process keeps at most `KEEP` (for the entries it used last) in `<root>/.spares/<owner>/`
and holds an flock on that folder while it lives; `sweep` removes the folders of processes
that are gone, when a process first links a spare and in `cairn cache prune`. A spare of an
entry that was removed or rebuilt since is never taken (its key names the ledger row and
content id) and is dropped at the next link ahead.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cairn.deps.manifest import Made, entry_unchanged, linked_ahead, still_as_made
from cairn.locks import flock
from cairn.removal import remove_tree
from cairn.store.dependency_caches import CacheRecord

KEEP = 4
SPARES = ".spares"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_Key = tuple[int, str, str]
"""(ledger row, content id, folder name) of the entry a spare was linked from."""


@dataclass(frozen=True)
class _Spare:
    entry: Path
    container: Path
    """`<owner folder>/<random>`; the spare itself is `container/<folder name>`."""
    made: tuple[Made, ...]


class _Pool:
    """One process's spares under one cache root, in a folder it holds locked."""

    def __init__(self, root: Path) -> None:
        sweep(root)
        self.lock, self.folder = _owned(root / SPARES)
        self.spares: OrderedDict[_Key, _Spare] = OrderedDict()
        self.linking: set[_Key] = set()
        self.guard = threading.Lock()
        self.pid = os.getpid()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a link ahead may still be running: swept later
            remove_tree(self.folder)
        os.close(self.lock)


def _owned(spares: Path) -> tuple[int, Path]:
    """A new folder under `spares`, locked by this process until it ends: (descriptor, folder).

    `sweep` may lock and remove a folder just made, before its owner locks it: the owner then
    holds a folder no longer there, and makes another.
    """
    while True:
        folder = spares / secrets.token_hex(8)
        folder.mkdir(parents=True)
        lock = os.open(folder, _DIR_FLAGS)
        flock(lock)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(folder).st_ino == os.fstat(lock).st_ino:
                return lock, folder
        os.close(lock)


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


def take(root: Path, entry: Path, record: CacheRecord, name: str, target: Path) -> bool:
    """Move this process's spare of the entry to `target` if it and the entry are unchanged."""
    pool = _POOLS.get(root)
    if pool is None:
        return False
    with pool.guard:
        spare = pool.spares.pop(_key(record, name), None)
    if spare is None:
        return False
    taken = False
    if entry_unchanged(entry, record, name) and still_as_made(spare.container, spare.made):
        with contextlib.suppress(OSError):
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
    made = None
    try:
        container.mkdir()
        if os.stat(container).st_dev == os.stat(near).st_dev:
            made = linked_ahead(entry, record, name, container, outside)
    finally:
        with pool.guard:
            pool.linking.discard(key)
            if made is not None:
                pool.spares[key] = _Spare(entry, container, made)
            gone = _dropped(pool) + ([] if made is not None else [container])
        for folder in gone:
            with contextlib.suppress(OSError):
                remove_tree(folder)
    return made is not None


def _dropped(pool: _Pool) -> list[Path]:
    """Drop spares of entries that are gone, then the least recently linked beyond KEEP."""
    gone = [key for key, spare in pool.spares.items() if not spare.entry.is_dir()]
    kept = [key for key in pool.spares if key not in gone]
    gone += kept[: max(0, len(kept) - KEEP)]
    return [pool.spares.pop(key).container for key in gone]


def held(root: Path) -> list[Path]:
    """The spares this process holds ready under `root`, least recently linked first."""
    pool = _POOLS.get(root)
    if pool is None:
        return []
    with pool.guard:
        return [spare.container / name for (_, _, name), spare in pool.spares.items()]


def sweep(root: Path) -> None:
    """Remove the spares of processes that are gone (their folder is not locked)."""
    spares = root / SPARES
    for folder in sorted(spares.iterdir()) if spares.is_dir() else []:
        try:
            lock = os.open(folder, _DIR_FLAGS)
        except OSError:
            continue  # removed meanwhile, or not a folder
        try:
            if flock(lock, wait=False):  # else its process still runs
                remove_tree(folder)
        finally:
            os.close(lock)
