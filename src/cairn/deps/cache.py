"""Cache entries: built once per fingerprint, audited, read-only, checked before every use.

Layout under the cache root (the lead passes `config.home / "deps"`):

    <root>/<fingerprint>/inputs/            the declarations and lockfile it was built from
    <root>/<fingerprint>/.venv/ or node_modules/   what is materialized into workspaces
    <root>/<fingerprint>/.cairn-manifest    what the entry held when it was made ready
    <root>/.staging/<fingerprint>-<random>/ a build in progress (renamed into place when done)
    <root>/.locks/<fingerprint>.lock        flock: exclusive to build or prune, shared to use

State lives in the `dependency_caches` ledger, keyed by fingerprint and host (host name plus a
hash of the root, so two homes on one machine never share a row). A ready entry is `chmod -R
a-w`, and its manifest records the content digest (paths, types, modes, file hashes, link
targets: `content_identity`) and every path's lstat (type and mode, size, mtime, inode, link
target); the ledger's `content_id` is the SHA-256 of the manifest, so the manifest cannot be
swapped. Symlinks are recreated as recorded and stay inside the tree, except a uv venv's
`bin/python`: it names the system interpreter the venv was built for (part of the
fingerprint; never a path in the cache or a workspace), which gives nothing a sandboxed
command cannot already read.

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

import contextlib
import errno
import fcntl
import functools
import hashlib
import operator
import os
import re
import secrets
import shutil
import socket
import stat
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cairn.deps.audit import Auditor, quarantine_reason, verdict
from cairn.deps.fingerprint import DependencyInputs, fingerprint, write_inputs
from cairn.deps.installer import Installer, InstallError, Package, QuarantinedError
from cairn.engine.identity import digest
from cairn.errors import CairnError
from cairn.sanitize import DIAGNOSIS_LIMIT, bound
from cairn.store import Store
from cairn.store import dependency_caches as ledger
from cairn.store.dependency_caches import CacheRecord, CacheStatus
from cairn.store.schema import utcnow

MARKER = ".cairn-dependencies"
MANIFEST = ".cairn-manifest"
TAMPERED = (
    "quarantined: a file in this dependency cache entry changed after it was built (its "
    "content no longer matches its recorded identity), so it is never used again; run "
    "`cairn cache prune` to remove it and the next job prepares the dependencies afresh"
)
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
Visitor = Callable[[bytes, str, os.stat_result], None]
_LINK_OUT = "the prepared environment holds a link that leads outside it; cairn refuses it"
# Pruning by age counts in days: one ledger write a minute per entry is plenty.
_TOUCH_EVERY = timedelta(minutes=1)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SECOND = 1_000_000_000


class DependencyCache:
    """Entries under one root, their state in the ledger of one store."""

    def __init__(
        self,
        store: Store,
        root: Path,
        *,
        auditors: Sequence[Auditor] = (),
        host: str | None = None,
    ) -> None:
        self.store = store
        self.root = Path(root).absolute()
        self.auditors = tuple(auditors)
        self.host = host or host_key(self.root)

    def entry_path(self, fingerprint_: str) -> Path:
        return self.root / fingerprint_

    def prepare(self, installer: Installer, inputs: DependencyInputs) -> CacheRecord:
        """The ready entry for these inputs: reused when the fingerprint is known, else built.

        A hit runs no package manager at all. Raises QuarantinedError for a quarantined entry
        and InstallError (the entry marked failed) when building it fails.
        """
        key = fingerprint(inputs, installer.environment())
        with self._locked(key, exclusive=True):
            with self.store.begin() as conn:
                record = ledger.find(conn, key, self.host)
                gone = not self.entry_path(key).is_dir()
                if record and record.status is CacheStatus.ready and gone:
                    ledger.delete(conn, record.id)  # removed by hand: nothing left to reuse
                    record = None
            if record and record.status is CacheStatus.ready:
                return self._reaudited(record)
            if record and record.status is CacheStatus.quarantined:
                raise QuarantinedError(record.diagnosis or TAMPERED)
            return self._build(installer, inputs, key)

    def verify(self, record: CacheRecord) -> CacheRecord:
        """Hash the entry's content in full; quarantine and refuse it when it differs."""
        record = self._usable(record)
        with self._locked(record.fingerprint, exclusive=False):
            self._check_content(record)
        return record

    def materialize(self, installer: Installer, record: CacheRecord, workspace: Path) -> int:
        """Hardlink the entry into `workspace/<target>`, checking it on the way; packages there.

        What is checked is what was linked (see the module docstring); on a mismatch the new
        folder is removed, and the entry quarantined unless its content proves unchanged.
        """
        entry = self.entry_path(record.fingerprint)
        target = Path(workspace) / installer.target
        outside = installer.environment().outside_links
        record = self._usable(record)
        with self._locked(record.fingerprint, exclusive=False):
            _clear_previous(target, installer.target)
            try:
                if not _linked_as_recorded(entry, record, installer.target, target, outside):
                    remove_tree(target)
                    self._check_content(record, _mirror(entry, installer.target, target, outside))
                (target / MARKER).write_text(record.fingerprint + "\n", encoding="utf-8")
            except BaseException:
                remove_tree(target)  # never half a layout
                raise
        if utcnow() - record.updated_at >= _TOUCH_EVERY:
            with self.store.begin() as conn:
                ledger.touch(conn, record.id)
        return len(installer.resolved(Path(workspace)))

    def _usable(self, record: CacheRecord) -> CacheRecord:
        """The entry's current row (another process may have quarantined it), if it is ready."""
        with self.store.begin() as conn:
            record = ledger.get(conn, record.id)
        if record.status is CacheStatus.quarantined:
            raise QuarantinedError(record.diagnosis or TAMPERED)
        if record.status is not CacheStatus.ready:
            raise InstallError(f"dependency cache entry {record.id} is {record.status}, not ready")
        return record

    def _check_content(self, record: CacheRecord, visit: Visitor | None = None) -> None:
        """Hash the whole entry (`visit` sees each path) against its manifest, read afresh."""
        entry = self.entry_path(record.fingerprint)
        try:
            recorded: str | None = read_manifest(entry, record.content_id).tree
            content_id, _size = content_identity(entry, visit, skip=(MANIFEST,))
        except (FileNotFoundError, ValueError):
            recorded = content_id = None
        if recorded is None or content_id != recorded:
            with self.store.begin() as conn:
                ledger.quarantine(conn, record.id, TAMPERED)
            raise QuarantinedError(TAMPERED)

    def entries(self) -> list[CacheRecord]:
        """This host's entries, oldest first."""
        with self.store.begin() as conn:
            return ledger.list_entries(conn, self.host)

    def verify_all(self) -> list[CacheRecord]:
        """Verify every ready entry of this host; the records after (mismatches quarantined)."""
        for record in self.entries():
            if record.status is CacheStatus.ready:
                with contextlib.suppress(QuarantinedError):
                    self.verify(record)
        return self.entries()

    def prune(
        self, *, everything: bool = False, unused_for: timedelta | None = None
    ) -> list[CacheRecord]:
        """Remove failed, quarantined and abandoned entries (and, if asked, unused ready ones).

        An entry in use (its lock held) is skipped; leftover staging folders are removed too.
        """
        removed = []
        now = utcnow()
        for record in self.entries():
            idle = unused_for is not None and now - record.updated_at >= unused_for
            wanted = everything or record.status is not CacheStatus.ready or idle
            if wanted and self._remove(record):
                removed.append(record)
        self._sweep_leftovers()
        return removed

    def _reaudited(self, record: CacheRecord) -> CacheRecord:
        """Check a ready entry's packages against today's advisories before reusing it."""
        if not self.auditors:
            return record
        listed = (record.audit or {}).get("packages", [])
        audit, reason = self._audit(record.ecosystem, [Package(*p) for p in listed])
        if reason is None:
            return record
        with self.store.begin() as conn:
            ledger.quarantine(conn, record.id, reason, audit=audit)
        raise QuarantinedError(reason)

    def _build(self, installer: Installer, inputs: DependencyInputs, key: str) -> CacheRecord:
        with self.store.begin() as conn:
            record = ledger.claim(conn, key, self.host, installer.ecosystem)
        staging = self.root / ".staging" / f"{key}-{secrets.token_hex(4)}"
        try:
            packages, content_id, size = self._built_entry(installer, inputs, staging, key)
            audit, reason = self._audit(installer.ecosystem, packages)
        except Exception as exc:
            remove_tree(staging)
            with self.store.begin() as conn:
                ledger.mark_failed(conn, record.id, _diagnosis(exc))
            if isinstance(exc, CairnError):
                raise
            raise InstallError(_diagnosis(exc)) from exc
        count = len(packages)
        with self.store.begin() as conn:
            if reason is None:
                return ledger.mark_ready(conn, record.id, package_count=count, size_bytes=size,
                                         content_id=content_id, audit=audit)  # fmt: skip
            ledger.quarantine(conn, record.id, reason, audit=audit, content_id=content_id)
        raise QuarantinedError(reason)

    def _audit(self, ecosystem: str, packages: list[Package]) -> tuple[dict[str, Any], str | None]:
        """The audit record (with the packages, for later re-checks) and a quarantine reason."""
        findings = [f for a in self.auditors for f in a.audit(ecosystem, packages)]
        listed = [[p.name, p.version] for p in packages]
        return verdict(self.auditors, findings) | {"packages": listed}, quarantine_reason(
            ecosystem, findings
        )

    def _built_entry(
        self, installer: Installer, inputs: DependencyInputs, staging: Path, key: str
    ) -> tuple[list[Package], str, int]:
        """Build into `staging`, move it into place read-only, record its manifest.

        Returns (packages, content id, size).
        """
        (staging / "inputs").mkdir(parents=True)
        write_inputs(staging / "inputs", inputs)
        installer.prepare(staging / "inputs", staging)
        outside = installer.environment().outside_links
        check_entry(staging / installer.target, outside, self.root)
        packages = installer.resolved(staging)
        final = self.entry_path(key)
        remove_tree(final)  # left by a build that died before it was recorded
        os.rename(staging, final)
        make_read_only(final)
        content_id, size = record_manifest(final)
        return packages, content_id, size

    def _remove(self, record: CacheRecord) -> bool:
        with self._locked(record.fingerprint, exclusive=True, wait=False) as held:
            if not held:
                return False
            remove_tree(self.entry_path(record.fingerprint))
            with self.store.begin() as conn:
                ledger.delete(conn, record.id)
            return True

    def _sweep_leftovers(self) -> None:
        """Remove staging folders of dead builds and entry folders the ledger does not know."""
        known = {record.fingerprint for record in self.entries()}
        staging = self.root / ".staging"
        leftovers = sorted(staging.iterdir()) if staging.is_dir() else []
        leftovers += [
            folder
            for folder in sorted(self.root.iterdir())
            if _FINGERPRINT.fullmatch(folder.name) and folder.name not in known
        ]
        for folder in leftovers:
            with self._locked(folder.name.split("-")[0], exclusive=True, wait=False) as held:
                if held:
                    remove_tree(folder)

    @contextlib.contextmanager
    def _locked(self, key: str, *, exclusive: bool, wait: bool = True) -> Iterator[bool]:
        (self.root / ".locks").mkdir(parents=True, exist_ok=True)
        with open(self.root / ".locks" / f"{key}.lock", "a") as handle:
            mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB)
            try:
                fcntl.flock(handle, mode)
            except BlockingIOError:
                yield False
                return
            yield True


def host_key(root: Path) -> str:
    """This host's name in the ledger: the host name and a hash of the cache root."""
    return f"{socket.gethostname()[:200]}#{digest(str(Path(root).absolute()))[:8]}"


def content_identity(
    folder: Path, visit: Visitor | None = None, *, skip: Sequence[str] = ()
) -> tuple[str, int]:
    """A digest over relative paths, types, modes, file hashes and link targets; total size.

    `visit` sees every path first, parents before children (materializing links with it);
    names in `skip` directly under `folder` are left out.
    """
    items = []
    for relative, path, info in _walk(folder, skip):
        if visit is not None:
            visit(relative, path, info)
        items.append((relative, path, info))
    content_id, size, _pointed = _identity(items)
    return content_id, size


def _identity(
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
            lambda share: [(p, _sha256(p)) for p in share],
            [paths[i::workers] for i in range(workers)],
        )
        return dict(pair for share in shares for pair in share)


def _sha256(path: str) -> bytes:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest().encode()


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
    items = list(_walk(entry, (MANIFEST,)))
    _settle([info.st_mtime_ns for _, _, info in items])
    tree, size, pointed = _identity(items)
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


def _settle(mtimes: Iterable[int]) -> None:
    """Wait until a write would give any path a later mtime than the one just recorded.

    A write stamps the file system's current tick; a write within the tick of a recorded
    mtime would leave it unchanged (git's "racily clean" files). Where timestamps carry
    nanoseconds a tick is at most a jiffy (10 ms at the slowest kernel clock): wait 20 ms;
    whole-second timestamps may be 2 s apart (FAT): wait 2 s.
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


class _Stale(Exception):
    """Something in the entry no longer matches its manifest."""


def _linked_as_recorded(
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
            _link_ok, entry / name, allowed=_allowed(outside), cache_root=entry.parent
        )
        base, made = os.fsencode(entry) + b"/", os.fsencode(target)
        for folder in plan.folders:
            inner = made + b"/" + folder.inner if folder.inner else made
            _link_folder(base + folder.relative, inner, folder, check)
    except (OSError, ValueError, _Stale):
        return False
    return True


def _link_folder(
    source_path: bytes, made: bytes, folder: _Folder, link_ok: Callable[[bytes, str], bool]
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
                if not link_ok(inner, pointed):
                    raise InstallError(_LINK_OUT)
                os.symlink(pointed, name, dir_fd=into)
        finally:
            os.close(into)
    finally:
        os.close(source)


def check_entry(folder: Path, outside_links: Sequence[str], cache_root: Path) -> None:
    """Refuse special files, and links that leave `folder` (but to `outside_links`)."""
    allowed = _allowed(outside_links)
    for relative, path, info in _walk(folder):
        if stat.S_ISLNK(info.st_mode):
            if not _link_ok(folder, relative, os.readlink(path), allowed, cache_root):
                raise InstallError(_LINK_OUT)
        elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            raise InstallError("the prepared environment holds a device, socket or pipe; refused")


def _mirror(entry: Path, name: str, target: Path, outside_links: Sequence[str]) -> Visitor:
    """A visitor that recreates `entry/<name>` at `target`: new folders, hardlinked files."""
    prefix = os.fsencode(name) + b"/"
    source = entry / name
    same_device = os.stat(entry).st_dev == os.stat(target.parent).st_dev
    allowed = _allowed(outside_links)

    def visit(relative: bytes, path: str, info: os.stat_result) -> None:
        if relative == prefix[:-1]:
            target.mkdir(mode=0o755)
        if not relative.startswith(prefix):
            return
        inner = relative[len(prefix) :]
        made = os.path.join(target, os.fsdecode(inner))
        if stat.S_ISLNK(info.st_mode):
            pointed = os.readlink(path)
            if not _link_ok(source, inner, pointed, allowed, entry.parent):
                raise InstallError(_LINK_OUT)
            os.symlink(pointed, made)
        elif stat.S_ISDIR(info.st_mode):
            os.mkdir(made, 0o755)
        else:
            _link_or_copy(path, made, same_device)

    return visit


def make_read_only(folder: Path) -> None:
    """`chmod -R a-w`: nobody without privileges changes a ready entry (or its hardlinks)."""
    for _relative, path, info in _walk(folder):
        if not stat.S_ISLNK(info.st_mode):
            os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o222)
    os.chmod(folder, stat.S_IMODE(os.stat(folder).st_mode) & ~0o222)


def remove_tree(folder: Path) -> None:
    """Remove a (possibly read-only) folder and everything in it; nothing if it is missing."""
    if not os.path.lexists(folder):
        return
    for path, _dirs, _files in os.walk(folder):  # never follows a symlink below `folder`
        os.chmod(path, 0o700)
    shutil.rmtree(folder)


def _walk(folder: Path, skip: Sequence[str] = ()) -> Iterator[tuple[bytes, str, os.stat_result]]:
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


def _allowed(outside_links: Sequence[str]) -> set[str]:
    return {os.path.realpath(p) for p in outside_links}


def _link_ok(
    root: Path, relative: bytes, pointed: str, allowed: set[str], cache_root: Path
) -> bool:
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


def _clear_previous(target: Path, name: str) -> None:
    """Remove an earlier materialization; refuse to replace anything else at `target`."""
    if not os.path.lexists(target):
        return
    if target.is_symlink() or not target.is_dir() or not (target / MARKER).is_file():
        raise InstallError(
            f"the workspace already has its own {name}, which cairn will not replace; remove it "
            f"from the repository (and list {name}/ in .gitignore) so cairn can provide it"
        )
    remove_tree(target)


def _diagnosis(exc: Exception) -> str:
    if isinstance(exc, CairnError):
        return bound(str(exc), DIAGNOSIS_LIMIT)
    if isinstance(exc, OSError):
        return f"preparing the dependencies failed: {exc.strerror or 'a file operation failed'}"
    return f"preparing the dependencies failed unexpectedly ({type(exc).__name__})"
