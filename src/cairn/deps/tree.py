"""File trees of cache entries: walked in a stable order, hashed, made read-only, linked.

Symlinks are recreated as recorded and stay inside the tree, except a uv venv's
`bin/python`: it names the system interpreter the venv was built for (part of the
fingerprint; never a path in the cache or a workspace), which gives nothing a sandboxed
command cannot already read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cairn.deps.installer import InstallError

Visitor = Callable[[bytes, str, os.stat_result], None]
LINK_OUT = "the prepared environment holds a link that leads outside it; cairn refuses it"


def walk(folder: Path, skip: Sequence[str] = ()) -> Iterator[tuple[bytes, str, os.stat_result]]:
    """Every path under `folder` in a stable order: (relative path as bytes, path, lstat).

    Names in `skip` directly under `folder` are left out.
    """
    pending = [(os.fsencode(folder), b"")]
    left_out = {os.fsencode(name) for name in skip}
    while pending:
        here, prefix = pending.pop()
        with os.scandir(here) as found:
            items = sorted(found, key=lambda e: e.name)
        if not prefix:
            items = [item for item in items if item.name not in left_out]
        folders = []
        for item in items:
            info = item.stat(follow_symlinks=False)
            relative = prefix + item.name
            yield relative, os.fsdecode(item.path), info
            if stat.S_ISDIR(info.st_mode):
                folders.append((item.path, relative + b"/"))
        pending.extend(reversed(folders))


def content_identity(
    folder: Path, visit: Visitor | None = None, *, skip: Sequence[str] = ()
) -> tuple[str, int]:
    """A digest over relative paths, types, modes, file hashes and link targets; total size.

    `visit` sees every path first, parents before children (materializing links with it);
    names in `skip` directly under `folder` are left out.
    """
    items = []
    for relative, path, info in walk(folder, skip):
        if visit is not None:
            visit(relative, path, info)
        items.append((relative, path, info))
    content_id, size, _pointed = identity(items)
    return content_id, size


def identity(
    items: list[tuple[bytes, str, os.stat_result]],
) -> tuple[str, int, dict[bytes, bytes]]:
    """content_identity of walked items, and the target of each link among them."""
    hashes = _file_hashes([path for _, path, info in items if stat.S_ISREG(info.st_mode)])
    hasher = hashlib.sha256()
    size = 0
    pointed = {}
    for relative, path, info in items:
        mode = b"%o" % stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            pointed[relative] = os.fsencode(os.readlink(path))
            fields = [b"l", relative, b"", pointed[relative]]
        elif stat.S_ISDIR(info.st_mode):
            fields = [b"d", relative, mode, b""]
        elif stat.S_ISREG(info.st_mode):
            fields = [b"f", relative, mode, hashes[path]]
            size += info.st_size
        else:
            fields = [b"?", relative, mode, b""]
        hasher.update(b"\0".join(fields) + b"\0")
    return hasher.hexdigest(), size, pointed


def _file_hashes(paths: list[str]) -> dict[str, bytes]:
    """The SHA-256 of each file, read by a few threads (reading and hashing release the GIL)."""
    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        shares = pool.map(
            lambda share: [(p, file_sha256(p)) for p in share],
            [paths[i::workers] for i in range(workers)],
        )
        return dict(pair for share in shares for pair in share)


def file_sha256(path: str) -> bytes:
    """The hex SHA-256 of one file's content: every file an identity hashes is read here.

    Public as a seam: a test wraps it to see which files an operation read (a cache hit
    reads none).
    """
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest().encode()


def make_read_only(folder: Path) -> None:
    """`chmod -R a-w`: nobody without privileges changes a ready entry (or its hardlinks)."""
    for _relative, path, info in walk(folder):
        if not stat.S_ISLNK(info.st_mode):
            os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o222)
    os.chmod(folder, stat.S_IMODE(os.stat(folder).st_mode) & ~0o222)


def check_entry(folder: Path, outside_links: Sequence[str], cache_root: Path) -> None:
    """Refuse special files, and links that leave `folder` (but to `outside_links`)."""
    allowed = allowed_outside(outside_links)
    for relative, path, info in walk(folder):
        if stat.S_ISLNK(info.st_mode):
            if not link_ok(folder, relative, os.readlink(path), allowed, cache_root):
                raise InstallError(LINK_OUT)
        elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            raise InstallError("the prepared environment holds a device, socket or pipe; refused")


def mirror(entry: Path, name: str, target: Path, outside_links: Sequence[str]) -> Visitor:
    """A visitor that recreates `entry/<name>` at `target`: new folders, hardlinked files."""
    prefix = os.fsencode(name) + b"/"
    source = entry / name
    same_device = os.stat(entry).st_dev == os.stat(target.parent).st_dev
    allowed = allowed_outside(outside_links)

    def visit(relative: bytes, path: str, info: os.stat_result) -> None:
        if relative == prefix[:-1]:
            target.mkdir(mode=0o755)
        if not relative.startswith(prefix):
            return
        inner = relative[len(prefix) :]
        made = os.path.join(target, os.fsdecode(inner))
        if stat.S_ISLNK(info.st_mode):
            pointed = os.readlink(path)
            if not link_ok(source, inner, pointed, allowed, entry.parent):
                raise InstallError(LINK_OUT)
            os.symlink(pointed, made)
        elif stat.S_ISDIR(info.st_mode):
            os.mkdir(made, 0o755)
        else:
            _link_or_copy(path, made, same_device)

    return visit


def allowed_outside(outside_links: Sequence[str]) -> set[str]:
    return {os.path.realpath(p) for p in outside_links}


def link_ok(root: Path, relative: bytes, pointed: str, allowed: set[str], cache_root: Path) -> bool:
    """A link may point inside `root`, or to an allowed path outside the cache."""
    if os.path.isabs(pointed):
        real = os.path.realpath(pointed)
        return real in allowed and not real.startswith(str(cache_root) + os.sep)
    base = os.path.dirname(os.path.join(str(root), os.fsdecode(relative)))
    landed = os.path.normpath(os.path.join(base, pointed))
    return landed == str(root) or landed.startswith(str(root) + os.sep)


def _link_or_copy(source: str, target: str, same_device: bool) -> None:
    if same_device:
        try:
            os.link(source, target)
            return
        except OSError as exc:
            # Another file system, a link limit, or hardlink protection: copy instead.
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
    shutil.copy2(source, target)
