"""Cache entries: built once per fingerprint, audited, read-only, verified before every use.

Layout under the cache root (the lead passes `config.home / "deps"`):

    <root>/<fingerprint>/inputs/            the declarations and lockfile it was built from
    <root>/<fingerprint>/.venv/ or node_modules/   what is materialized into workspaces
    <root>/.staging/<fingerprint>-<random>/ a build in progress (renamed into place when done)
    <root>/.locks/<fingerprint>.lock        flock: exclusive to build or prune, shared to use

State lives in the `dependency_caches` ledger, keyed by fingerprint and host (host name plus a
hash of the root, so two homes on one machine never share a row). A ready entry is `chmod -R
a-w` with its content identity (paths, types, modes, file hashes, link targets) recorded. Each
materialization recomputes it from the very files it hardlinks into the workspace (copies
across file systems, under new folders) and quarantines the entry on a mismatch. Symlinks are
recreated as they are and stay inside the tree, except a uv venv's `bin/python`: it names the
system interpreter the venv was built for (part of the fingerprint; never a path in the cache
or a workspace), which gives nothing a sandboxed command cannot already read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
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
TAMPERED = (
    "quarantined: a file in this dependency cache entry changed after it was built (its "
    "content no longer matches its recorded identity), so it is never used again; run "
    "`cairn cache prune` to remove it and the next job prepares the dependencies afresh"
)
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
Visitor = Callable[[bytes, str, os.stat_result], None]
_LINK_OUT = "the prepared environment holds a link that leads outside it; cairn refuses it"


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
        """Recompute the entry's content identity; quarantine and refuse it when it differs."""
        record = self._usable(record)
        with self._locked(record.fingerprint, exclusive=False):
            self._check_identity(record)
        return record

    def materialize(self, installer: Installer, record: CacheRecord, workspace: Path) -> int:
        """Hardlink the entry into `workspace/<target>`, verifying it on the way; packages there.

        The content hashed is the very content linked, so nothing changes between the check
        and the use; on a mismatch the new folder is removed and the entry quarantined.
        """
        entry = self.entry_path(record.fingerprint)
        target = Path(workspace) / installer.target
        outside = installer.environment().outside_links
        record = self._usable(record)
        with self._locked(record.fingerprint, exclusive=False):
            _clear_previous(target, installer.target)
            mirror = _mirror(entry, installer.target, target, outside)
            try:
                self._check_identity(record, mirror)
            except QuarantinedError:
                remove_tree(target)
                raise
            (target / MARKER).write_text(record.fingerprint + "\n", encoding="utf-8")
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

    def _check_identity(self, record: CacheRecord, visit: Visitor | None = None) -> None:
        try:
            content_id, _size = content_identity(self.entry_path(record.fingerprint), visit)
        except FileNotFoundError:
            content_id = None
        if content_id != record.content_id:
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
        """Build into `staging`, then move it into place read-only: (packages, content id, size)."""
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
        content_id, size = content_identity(final)
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


def content_identity(folder: Path, visit: Visitor | None = None) -> tuple[str, int]:
    """A digest over relative paths, types, modes, file hashes and link targets; total size.

    `visit` sees every path first, parents before children (materializing links with it).
    """
    items = []
    for relative, path, info in _walk(folder):
        if visit is not None:
            visit(relative, path, info)
        items.append((relative, path, info))
    hashes = _file_hashes([path for _, path, info in items if stat.S_ISREG(info.st_mode)])
    hasher = hashlib.sha256()
    size = 0
    for relative, path, info in items:
        mode = b"%o" % stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            fields = [b"l", relative, b"", os.fsencode(os.readlink(path))]
        elif stat.S_ISDIR(info.st_mode):
            fields = [b"d", relative, mode, b""]
        elif stat.S_ISREG(info.st_mode):
            fields = [b"f", relative, mode, hashes[path]]
            size += info.st_size
        else:
            fields = [b"?", relative, mode, b""]
        hasher.update(b"\0".join(fields) + b"\0")
    return hasher.hexdigest(), size


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


def check_entry(folder: Path, outside_links: Sequence[str], cache_root: Path) -> None:
    """Refuse special files, and links that leave `folder` (but to `outside_links`)."""
    allowed = {os.path.realpath(p) for p in outside_links}
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
    allowed = {os.path.realpath(p) for p in outside_links}

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


def _walk(folder: Path) -> Iterator[tuple[bytes, str, os.stat_result]]:
    """Every path under `folder` in a stable order: (relative path as bytes, path, lstat)."""
    pending = [(os.fsencode(folder), b"")]
    while pending:
        here, prefix = pending.pop()
        with os.scandir(here) as found:
            items = sorted(found, key=lambda e: e.name)
        folders = []
        for item in items:
            info = item.stat(follow_symlinks=False)
            relative = prefix + item.name
            yield relative, os.fsdecode(item.path), info
            if stat.S_ISDIR(info.st_mode):
                folders.append((item.path, relative + b"/"))
        pending.extend(reversed(folders))


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
