"""The dependency cache ledger, on SQLite and on PostgreSQL (the root `store` fixture)."""

from __future__ import annotations

import pytest

from cairn.errors import InvalidState
from cairn.store import Store
from cairn.store import dependency_caches as ledger
from cairn.store.dependency_caches import CacheStatus

FP = "a" * 64
AUDIT = {"auditors": ["osv-directory"], "findings": [], "packages": [["six", "1.16.0"]]}


def test_an_entry_goes_from_preparing_to_ready_with_its_results(store: Store) -> None:
    with store.begin() as conn:
        claimed = ledger.claim(conn, FP, "host-a", "pypi")
        assert claimed.status is CacheStatus.preparing and claimed.content_id is None
        ready = ledger.mark_ready(
            conn, claimed.id, package_count=1, size_bytes=1234, content_id="c" * 64, audit=AUDIT
        )
    assert ready.status is CacheStatus.ready
    assert (ready.package_count, ready.size_bytes, ready.content_id) == (1, 1234, "c" * 64)
    assert ready.audit == AUDIT and ready.created_at == claimed.created_at
    with store.begin() as conn:
        assert ledger.find(conn, FP, "host-a") == ready
        assert ledger.find(conn, FP, "host-b") is None


def test_a_ready_entry_is_never_reclaimed_or_rewritten(store: Store) -> None:
    with store.begin() as conn:
        entry = ledger.claim(conn, FP, "host-a", "npm")
        ledger.mark_ready(conn, entry.id, package_count=3, size_bytes=9, content_id="x", audit={})
    for attempt in (
        lambda conn: ledger.claim(conn, FP, "host-a", "npm"),
        lambda conn: ledger.mark_ready(
            conn, entry.id, package_count=4, size_bytes=9, content_id="y", audit={}
        ),
        lambda conn: ledger.mark_failed(conn, entry.id, "late failure"),
    ):
        with pytest.raises(InvalidState, match="no longer"), store.begin() as conn:
            attempt(conn)
    with store.begin() as conn:
        assert ledger.get(conn, entry.id).content_id == "x"


def test_a_failed_or_abandoned_entry_is_claimed_again_from_scratch(store: Store) -> None:
    with store.begin() as conn:
        first = ledger.claim(conn, FP, "host-a", "pypi")
        failed = ledger.mark_failed(conn, first.id, "no wheel for docopt")
        assert failed.status is CacheStatus.failed and failed.diagnosis == "no wheel for docopt"
        again = ledger.claim(conn, FP, "host-a", "pypi")
        assert (again.id, again.status, again.diagnosis) == (first.id, CacheStatus.preparing, None)
        abandoned = ledger.claim(conn, FP, "host-a", "pypi")  # its builder died
        assert abandoned.status is CacheStatus.preparing


def test_quarantine_is_final_until_the_row_is_deleted(store: Store) -> None:
    with store.begin() as conn:
        entry = ledger.claim(conn, FP, "host-a", "npm")
        ledger.mark_ready(conn, entry.id, package_count=1, size_bytes=1, content_id="x", audit={})
        held = ledger.quarantine(conn, entry.id, "tampered", audit={"findings": []})
        assert (held.status, held.diagnosis, held.audit) == (
            CacheStatus.quarantined,
            "tampered",
            {"findings": []},
        )
    with pytest.raises(InvalidState), store.begin() as conn:
        ledger.claim(conn, FP, "host-a", "npm")
    with store.begin() as conn:
        ledger.delete(conn, entry.id)
        assert ledger.claim(conn, FP, "host-a", "npm").status is CacheStatus.preparing


def test_touch_marks_use_of_ready_entries_only_and_hosts_are_separate(store: Store) -> None:
    with store.begin() as conn:
        a = ledger.claim(conn, FP, "host-a", "npm")
        b = ledger.claim(conn, FP, "host-b", "npm")
        ready = ledger.mark_ready(
            conn, a.id, package_count=1, size_bytes=1, content_id="x", audit={}
        )
        ledger.touch(conn, a.id)
        ledger.touch(conn, b.id)
        assert ledger.get(conn, a.id).updated_at > ready.updated_at
        assert ledger.get(conn, b.id).updated_at == b.updated_at
        assert [e.id for e in ledger.list_entries(conn, "host-b")] == [b.id]
        assert [e.id for e in ledger.list_entries(conn)] == [a.id, b.id]
