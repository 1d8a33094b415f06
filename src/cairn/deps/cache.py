"""Cache entries: built once per fingerprint, audited, read-only, checked before every use.

Layout under the cache root (`Config.deps_dir`, that is `<home>/deps`):

    <root>/<fingerprint>/inputs/            the declarations and lockfile it was built from
    <root>/<fingerprint>/.venv/ or node_modules/   what is materialized into workspaces
    <root>/<fingerprint>/.cairn-manifest    what the entry held when it was made ready
    <root>/.staging/<fingerprint>-<random>/ a build in progress (renamed into place when done)
    <root>/.locks/<fingerprint>.lock        flock: exclusive to build or prune, shared to use

State lives in the `dependency_caches` ledger, keyed by fingerprint and host (host name plus a
hash of the root, so two homes on one machine never share a row). A ready entry is `chmod -R
a-w`; `cairn.deps.manifest` describes its manifest and the check each materialization makes
against it, `cairn.deps.tree` how its files are walked, hashed and linked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from cairn.canonical import digest
from cairn.deps import spares
from cairn.deps.audit import Auditor, quarantine_reason, verdict
from cairn.deps.fingerprint import DependencyInputs, fingerprint, write_inputs
from cairn.deps.installer import Installer, InstallError, Package, QuarantinedError
from cairn.deps.manifest import MANIFEST, linked_as_recorded, read_manifest, record_manifest
from cairn.deps.tree import (
    Visitor,
    check_entry,
    content_identity,
    make_read_only,
    mirror,
)
from cairn.errors import CairnError
from cairn.locks import locked
from cairn.removal import remove_tree
from cairn.sanitize import DIAGNOSIS_LIMIT, bound
from cairn.store import Store
from cairn.store import dependency_caches as ledger
from cairn.store.dependency_caches import CacheRecord, CacheStatus
from cairn.store.schema import utcnow
from cairn.workspace.commands import DEPENDENCY_MARKER as MARKER

TAMPERED = (
    "quarantined: a file in this dependency cache entry changed after it was built (its "
    "content no longer matches its recorded identity), so it is never used again"
)
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
# Pruning by age counts in days: one ledger write a minute per entry is plenty.
_TOUCH_EVERY = timedelta(minutes=1)
_log = logging.getLogger("cairn.deps")


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

    def materialize(
        self, installer: Installer, record: CacheRecord, workspace: Path
    ) -> list[Package]:
        """Hardlink the entry into `workspace/<target>`, checking it on the way; packages there.

        A spare this process linked ahead is moved in instead, if still as it was made (see
        `cairn.deps.spares`). What is checked is what was linked (see `cairn.deps.manifest`);
        on a mismatch the new folder is removed, and the entry quarantined unless its content
        proves unchanged.
        """
        entry = self.entry_path(record.fingerprint)
        target = Path(workspace) / installer.target
        outside = installer.environment().outside_links
        record = self._usable(record)
        with self._locked(record.fingerprint, exclusive=False):
            _clear_previous(target, installer.target)
            try:
                taken = spares.take(self.root, entry, record, installer.target, target)
                if not taken and not linked_as_recorded(
                    entry, record, installer.target, target, outside
                ):
                    remove_tree(target)
                    self._check_content(record, mirror(entry, installer.target, target, outside))
                (target / MARKER).write_text(record.fingerprint + "\n", encoding="utf-8")
            except BaseException:
                remove_tree(target)  # never half a layout
                raise
        if utcnow() - record.updated_at >= _TOUCH_EVERY:
            with self.store.begin() as conn:
                ledger.touch(conn, record.id)
        return installer.resolved(Path(workspace))

    def link_ahead(self, installer: Installer, record: CacheRecord, workspace: Path) -> bool:
        """Link a spare of the entry for this process's next workspace beside `workspace`.

        Off the job's path: the next `materialize` of the entry takes it by a rename (see
        `cairn.deps.spares`), after checking the entry is still ready. Touches no ledger, so
        any thread may run it. Whether a spare is ready; never raises, a spare is only a head
        start.
        """
        try:
            with self._locked(record.fingerprint, exclusive=False):
                return spares.link_ahead(
                    self.root,
                    self.entry_path(record.fingerprint),
                    record,
                    installer.target,
                    installer.environment().outside_links,
                    near=Path(workspace),
                )
        except Exception:  # the next materialize links as usual
            _log.debug("no spare linked for entry %s", record.id, exc_info=True)
            return False

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
        spares.sweep(self.root)
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

    def lock_path(self, fingerprint_: str) -> Path:
        """The entry's lock: held exclusive to build or remove it, shared to use it."""
        return self.root / ".locks" / f"{fingerprint_}.lock"

    def _locked(
        self, key: str, *, exclusive: bool, wait: bool = True
    ) -> contextlib.AbstractContextManager[bool]:
        return locked(self.lock_path(key), shared=not exclusive, wait=wait)


def host_key(root: Path) -> str:
    """This host's name in the ledger: the host name and a hash of the cache root."""
    return f"{socket.gethostname()[:200]}#{digest(str(Path(root).absolute()))[:8]}"


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
