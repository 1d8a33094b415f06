"""An entry's manifest, and the check each materialization makes against it.

A ready entry's manifest (`.cairn-manifest`) records the content digest (paths, types, modes,
file hashes, link targets: `content_identity`) and every path's lstat (type and mode, size,
mtime, inode, link target); the ledger's `content_id` is the SHA-256 of the manifest, so the
manifest cannot be swapped.

Each materialization hardlinks the files and compares the lstat of every hardlink it made (so
the very inode linked), every folder and every link with the manifest. Changing a file's
bytes changes its mtime, replacing it changes its inode, adding or removing a name changes
its folder's mtime; ctime and link count are not compared, since hardlinking into
workspaces changes both. On any difference (and for copies across file systems) the entry's
content is hashed in full: a different content or mode quarantines it, the same content is
used. The residual gap: a deliberate write that also restores the file's mtime (`utime`)
keeps size, inode and mtime, so it passes this check until `verify` (`cairn cache verify`)
hashes the content in full. Writes that land within the file system's timestamp tick of the
recorded mtime would pass too, so recording waits until that tick is over.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import os
import stat
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cairn.deps.installer import InstallError
from cairn.deps.tree import LINK_OUT, allowed_outside, identity, link_ok, walk
from cairn.store.dependency_caches import CacheRecord

MANIFEST = ".cairn-manifest"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SECOND = 1_000_000_000


# What the fast check compares of a path: st_mode (type and permissions), size, mtime and
# inode. Never ctime or the link count: hardlinking into a workspace changes both.
Facts = tuple[int, int, int, int]
_facts: Callable[[os.stat_result], Facts] = operator.attrgetter(
    "st_mode", "st_size", "st_mtime_ns", "st_ino"
)


# One path of a manifest: (relative path, facts, link target or b"").
Row = tuple[bytes, Facts, bytes]
_HEADER = b"cairn-manifest 2"
_FACTS = struct.Struct("<QQqQ")


@dataclass(frozen=True)
class Manifest:
    """What an entry held when it was made ready (its own file aside).

    Encoded as `header NUL tree NUL size NUL count NUL`, then each row's facts as four
    little-endian 64-bit numbers, then each row's path and link target, each NUL-ended: a
    process that has not seen the entry yet decodes even a large one in a few milliseconds.
    """

    tree: str
    """content_identity of the entry."""
    size: int
    rows: tuple[Row, ...]
    """Every path under the entry, parents before children."""

    def encode(self) -> bytes:
        head = [_HEADER, self.tree.encode(), b"%d" % self.size, b"%d" % len(self.rows), b""]
        facts = b"".join(_FACTS.pack(*facts) for _, facts, _ in self.rows)
        names = b"".join(relative + b"\0" + pointed + b"\0" for relative, _, pointed in self.rows)
        return b"\0".join(head) + facts + names

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        """Raises ValueError for anything `encode` did not write."""
        header, tree, size, count, rest = data.split(b"\0", 4)
        cut = _FACTS.size * int(count)
        names = rest[cut:].split(b"\0")
        if header != _HEADER or len(rest) < cut or names.pop() or len(names) != 2 * int(count):
            raise ValueError("not a cairn manifest")
        facts = _FACTS.iter_unpack(rest[:cut])
        rows = tuple(zip(names[::2], facts, names[1::2], strict=True))
        return cls(tree.decode("ascii"), int(size), rows)


def record_manifest(entry: Path) -> tuple[str, int]:
    """Hash a read-only entry and write its manifest into it: (content id, size).

    The content id is the manifest's SHA-256; the ledger keeps it, so the manifest is trusted
    only while it hashes to that.
    """
    items = list(walk(entry, (MANIFEST,)))
    settle([info.st_mtime_ns for _, _, info in items])
    tree, size, pointed = identity(items)
    rows = tuple((r, _facts(info), pointed.get(r, b"")) for r, _, info in items)
    if _changed(entry, rows):  # a write while hashing: what was hashed is not what is there
        raise InstallError("the prepared environment changed while cairn recorded it; try again")
    data = Manifest(tree, size, rows).encode()
    mode = stat.S_IMODE(os.stat(entry).st_mode)
    os.chmod(entry, mode | stat.S_IWUSR)
    try:
        made = os.open(entry / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        with open(made, "wb") as out:
            out.write(data)
    finally:
        os.chmod(entry, mode)
    return hashlib.sha256(data).hexdigest(), size


def read_manifest(entry: Path, content_id: str | None) -> Manifest:
    """The entry's manifest, if it still hashes to `content_id` (else ValueError)."""
    data = (entry / MANIFEST).read_bytes()
    if hashlib.sha256(data).hexdigest() != content_id:
        raise ValueError("the manifest does not match the ledger")
    return Manifest.decode(data)


def settle(mtimes: Iterable[int]) -> None:
    """Wait until a write would give any path a later mtime than the one just recorded.

    A write stamps the file system's current tick; a write within the tick of a recorded
    mtime would leave it unchanged (git's "racily clean" files). Where timestamps carry
    nanoseconds a tick is at most a jiffy (10 ms at the slowest kernel clock): wait 20 ms;
    whole-second timestamps may be 2 s apart (FAT): wait 2 s.

    Public as a seam: between linking a tree and walking it to record it, this wait is the
    moment a concurrent change would land, so a test stands in for it to make that change.
    """
    now = time.time_ns()
    recent = [m for m in mtimes if m > now - 3 * _SECOND]
    if not recent:
        return
    tick = _SECOND // 50 if any(m % _SECOND for m in recent) else 2 * _SECOND
    wait = min(max(recent) + tick - now, 2 * tick)
    if wait > 0:
        time.sleep(wait / _SECOND)


def _changed(entry: Path, rows: Iterable[Row]) -> bool:
    """Whether any path's lstat differs from its row (or the path is gone)."""
    base = os.fsencode(entry) + b"/"
    try:
        return any(_facts(os.lstat(base + relative)) != facts for relative, facts, _ in rows)
    except OSError:
        return True


@dataclass(frozen=True)
class _Folder:
    """One folder of the materialized tree and what goes into it."""

    relative: bytes
    """Its path in the entry."""
    inner: bytes
    """Its path in the workspace's target folder (b"" for the target itself)."""
    facts: Facts
    files: list[tuple[bytes, Facts]] = field(default_factory=list)
    links: list[tuple[bytes, bytes, Facts, bytes]] = field(default_factory=list)
    """(name, path in the target folder, facts, link target)."""


@dataclass(frozen=True)
class _Plan:
    """A manifest arranged for linking one target: its folders in order, and the other rows."""

    folders: tuple[_Folder, ...]
    others: tuple[Row, ...]


@functools.lru_cache(maxsize=16)
def _recorded_plan(entry: Path, content_id: str, name: str) -> _Plan | None:
    """The plan for linking `entry/<name>`: parsed once per process, trusted by its hash."""
    rows = read_manifest(entry, content_id).rows
    own, prefix = os.fsencode(name), os.fsencode(name) + b"/"
    folders: dict[bytes, _Folder] = {}
    others = []
    for relative, facts, pointed in rows:
        if relative != own and not relative.startswith(prefix):
            others.append((relative, facts, pointed))
            continue
        inner = relative[len(prefix) :]
        parent, _, leaf = inner.rpartition(b"/")
        kind = stat.S_IFMT(facts[0])
        if kind == stat.S_IFREG:
            folders[parent].files.append((leaf, facts))
        elif kind == stat.S_IFDIR:
            folders[inner] = _Folder(relative, inner, facts)
        elif kind == stat.S_IFLNK:
            folders[parent].links.append((leaf, inner, facts, pointed))
        else:
            return None
    if b"" not in folders:
        return None
    return _Plan(tuple(folders.values()), tuple(others))


# A path of a spare: (relative path, facts, ctime). The ctime of a folder or link a spare made
# is its own and no `utime` resets it; a file's moves whenever a workspace links it (0: not
# compared).
Made = tuple[bytes, Facts, int]


def linked_ahead(
    entry: Path, record: CacheRecord, name: str, container: Path, outside: Sequence[str]
) -> tuple[Made, ...] | None:
    """Link `entry/<name>` into `container/<name>` ahead of need; what was made, or None.

    Linked and checked as `linked_as_recorded` does, then walked once the timestamp tick of
    the last change is over (so no later change can hide in it): every name must be the
    manifest's, of its type, every file the recorded inode and every link the recorded
    target. None when anything differs. `still_as_made` compares the result later.
    """
    if not linked_as_recorded(entry, record, name, container / name, outside):
        return None
    plan = _recorded_plan(entry, record.content_id or "", name)
    if plan is None:
        return None
    expected = _paths(plan)
    settle([info.st_mtime_ns for _, _, info in walk(container)])
    made = []
    for relative, path, info in walk(container):
        facts, pointed = expected.pop(relative, (None, b""))
        if facts is None or stat.S_IFMT(facts[0]) != stat.S_IFMT(info.st_mode):
            return None
        if stat.S_ISREG(info.st_mode):
            if _facts(info) != facts:
                return None
            made.append((relative, facts, 0))
            continue
        if stat.S_ISLNK(info.st_mode) and os.fsencode(os.readlink(path)) != pointed:
            return None
        made.append((relative, _facts(info), info.st_ctime_ns))
    return tuple(made) if not expected else None


def still_as_made(container: Path, made: Iterable[Made]) -> bool:
    """Whether every path `linked_ahead` made under `container` still has its lstat."""
    base = os.fsencode(container) + b"/"
    try:
        for relative, facts, ctime in made:
            info = os.lstat(base + relative)
            if _facts(info) != facts or (ctime and info.st_ctime_ns != ctime):
                return False
    except OSError:
        return False
    return True


def entry_unchanged(entry: Path, record: CacheRecord, name: str) -> bool:
    """Whether the entry's folders and files outside `name` still have their lstat.

    A spare holds the entry's file inodes, which it checks itself; this catches a name added
    to, removed from or replaced in the entry since, so that it is hashed and quarantined.
    """
    try:
        plan = _recorded_plan(entry, record.content_id or "", name)
    except (OSError, ValueError):
        return False
    if plan is None:
        return False
    folders = tuple((folder.relative, folder.facts, b"") for folder in plan.folders)
    return not _changed(entry, plan.others + folders)


def _paths(plan: _Plan) -> dict[bytes, tuple[Facts, bytes]]:
    """Every path of a plan, relative to the entry: (facts, link target or b"")."""
    found: dict[bytes, tuple[Facts, bytes]] = {}
    for folder in plan.folders:
        found[folder.relative] = (folder.facts, b"")
        for leaf, facts in folder.files:
            found[folder.relative + b"/" + leaf] = (facts, b"")
        for leaf, _inner, facts, pointed in folder.links:
            found[folder.relative + b"/" + leaf] = (facts, pointed)
    return found


class _Stale(Exception):
    """Something in the entry no longer matches its manifest."""


def linked_as_recorded(
    entry: Path, record: CacheRecord, name: str, target: Path, outside: Sequence[str]
) -> bool:
    """Hardlink `entry/<name>` to `target`, checking what each link made against the manifest.

    False when anything differs, or a file cannot be hardlinked (another file system, a link
    limit): the caller removes `target` and falls back to hashing the content. One thread:
    measured, a second one linking beside it only contends for the same file system locks.
    """
    try:
        plan = _recorded_plan(entry, record.content_id or "", name)
        if plan is None or _changed(entry, plan.others):
            return False
        if os.stat(entry).st_dev != os.stat(target.parent).st_dev:
            return False
        check = functools.partial(
            link_ok, entry / name, allowed=allowed_outside(outside), cache_root=entry.parent
        )
        base, made = os.fsencode(entry) + b"/", os.fsencode(target)
        for folder in plan.folders:
            inner = made + b"/" + folder.inner if folder.inner else made
            _link_folder(base + folder.relative, inner, folder, check)
    except (OSError, ValueError, _Stale):
        return False
    return True


def _link_folder(
    source_path: bytes, made: bytes, folder: _Folder, check_link: Callable[[bytes, str], bool]
) -> None:
    """Make `made` and fill it from the entry folder, comparing each path with the manifest.

    Both folders are opened without following links; a file is compared after it is linked,
    so what is compared is the very inode the workspace got.
    """
    source = os.open(source_path, _DIR_FLAGS)
    try:
        if _facts(os.fstat(source)) != folder.facts:
            raise _Stale
        os.mkdir(made, 0o755)
        into = os.open(made, _DIR_FLAGS)
        try:
            for name, facts in folder.files:
                os.link(name, name, src_dir_fd=source, dst_dir_fd=into, follow_symlinks=False)
                if _facts(os.stat(name, dir_fd=into, follow_symlinks=False)) != facts:
                    raise _Stale
            for name, inner, facts, target in folder.links:
                if _facts(os.stat(name, dir_fd=source, follow_symlinks=False)) != facts:
                    raise _Stale
                pointed = os.fsdecode(target)
                if not check_link(inner, pointed):
                    raise InstallError(LINK_OUT)
                os.symlink(pointed, name, dir_fd=into)
        finally:
            os.close(into)
    finally:
        os.close(source)
