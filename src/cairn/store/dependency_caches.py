"""The dependency cache ledger: one row per fingerprint per host, and what became of it.

A row is `preparing` while one process builds its entry, then `ready` (read-only, with its
content identity), `failed` (nothing usable; a later preparation may try again) or
`quarantined` (a high-risk advisory, or content that no longer matches its identity; never
used again until pruned). A ready row's results are never rewritten: only quarantine moves it.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from cairn.errors import InvalidState
from cairn.store.records import Record
from cairn.store.schema import dependency_caches, utcnow


class CacheStatus(StrEnum):
    """Where one cache entry stands."""

    preparing = "preparing"
    """One process (holding the host's lock for this fingerprint) is building the entry."""
    ready = "ready"
    """Built, audited, read-only, its content identity recorded: safe to materialize."""
    failed = "failed"
    """The build stopped (a refused source, a missing wheel, a network error); may be retried."""
    quarantined = "quarantined"
    """A high-risk advisory or tampered content: refused until `cairn cache prune` removes it."""


@dataclasses.dataclass(frozen=True)
class CacheRecord(Record):
    id: int
    fingerprint: str
    host: str
    ecosystem: str
    status: CacheStatus
    audit: dict[str, Any] | None
    package_count: int | None
    size_bytes: int | None
    content_id: str | None
    diagnosis: str | None
    created_at: datetime
    updated_at: datetime
    """Also the last time the entry was materialized (see `touch`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", CacheStatus(self.status))


def find(conn: sa.Connection, fingerprint: str, host: str) -> CacheRecord | None:
    """The row for `fingerprint` on `host`, if there is one."""
    row = conn.execute(
        sa.select(dependency_caches).where(
            dependency_caches.c.fingerprint == fingerprint, dependency_caches.c.host == host
        )
    ).first()
    return CacheRecord.from_row(row) if row else None


def get(conn: sa.Connection, entry_id: int) -> CacheRecord:
    row = conn.execute(sa.select(dependency_caches).where(dependency_caches.c.id == entry_id))
    return CacheRecord.from_row(row.one())


def claim(conn: sa.Connection, fingerprint: str, host: str, ecosystem: str) -> CacheRecord:
    """Start (or restart) building an entry: a new row, or a failed/abandoned one reset.

    The caller holds the host's lock for this fingerprint, so a `preparing` row found here was
    left by a process that died. A ready or quarantined row is never reset.
    """
    now = utcnow()
    existing = find(conn, fingerprint, host)
    if existing is None:
        conn.execute(
            sa.insert(dependency_caches).values(
                fingerprint=fingerprint,
                host=host,
                ecosystem=ecosystem,
                status=CacheStatus.preparing.value,
                created_at=now,
                updated_at=now,
            )
        )
    else:
        reset = {"audit": None, "package_count": None, "size_bytes": None, "content_id": None}
        again = (CacheStatus.failed, CacheStatus.preparing)
        _move(
            conn,
            existing.id,
            again,
            status="preparing",
            diagnosis=None,
            ecosystem=ecosystem,
            **reset,
        )
    found = find(conn, fingerprint, host)
    assert found is not None
    return found


def mark_ready(
    conn: sa.Connection,
    entry_id: int,
    *,
    package_count: int,
    size_bytes: int,
    content_id: str,
    audit: dict[str, Any],
) -> CacheRecord:
    """Record a finished, audited, read-only entry and its content identity."""
    _move(
        conn,
        entry_id,
        (CacheStatus.preparing,),
        status=CacheStatus.ready.value,
        package_count=package_count,
        size_bytes=size_bytes,
        content_id=content_id,
        audit=audit,
        diagnosis=None,
    )
    return get(conn, entry_id)


def mark_failed(conn: sa.Connection, entry_id: int, diagnosis: str) -> CacheRecord:
    """Record that building the entry stopped, with a bounded, path-free diagnosis."""
    _move(
        conn,
        entry_id,
        (CacheStatus.preparing,),
        status=CacheStatus.failed.value,
        diagnosis=diagnosis,
    )
    return get(conn, entry_id)


def quarantine(
    conn: sa.Connection,
    entry_id: int,
    diagnosis: str,
    *,
    audit: dict[str, Any] | None = None,
    content_id: str | None = None,
) -> CacheRecord:
    """Refuse an entry from now on (from any status), saying why."""
    values: dict[str, Any] = {"status": CacheStatus.quarantined.value, "diagnosis": diagnosis}
    if audit is not None:
        values["audit"] = audit
    if content_id is not None:
        values["content_id"] = content_id
    conn.execute(
        sa.update(dependency_caches)
        .where(dependency_caches.c.id == entry_id)
        .values(updated_at=utcnow(), **values)
    )
    return get(conn, entry_id)


def touch(conn: sa.Connection, entry_id: int) -> None:
    """Note that a ready entry was just used, so pruning by age spares it."""
    conn.execute(
        sa.update(dependency_caches)
        .where(
            dependency_caches.c.id == entry_id,
            dependency_caches.c.status == CacheStatus.ready.value,
        )
        .values(updated_at=utcnow())
    )


def list_entries(conn: sa.Connection, host: str | None = None) -> list[CacheRecord]:
    """Every entry (of one host when given), oldest first."""
    query = sa.select(dependency_caches).order_by(dependency_caches.c.id)
    if host is not None:
        query = query.where(dependency_caches.c.host == host)
    return [CacheRecord.from_row(r) for r in conn.execute(query)]


def delete(conn: sa.Connection, entry_id: int) -> None:
    """Forget an entry whose folder has been removed."""
    conn.execute(sa.delete(dependency_caches).where(dependency_caches.c.id == entry_id))


def _move(
    conn: sa.Connection, entry_id: int, allowed: tuple[CacheStatus, ...], **values: Any
) -> None:
    done = conn.execute(
        sa.update(dependency_caches)
        .where(
            dependency_caches.c.id == entry_id,
            dependency_caches.c.status.in_([s.value for s in allowed]),
        )
        .values(updated_at=utcnow(), **values)
    )
    if done.rowcount != 1:
        wanted = " or ".join(s.value for s in allowed)
        raise InvalidState(
            f"dependency cache entry {entry_id} is no longer {wanted}; "
            "another process changed it, so prepare the dependencies again"
        )
