"""cairn.locks: shared and exclusive flocks, tried without waiting, re-entrant where asked."""

from __future__ import annotations

import threading
from pathlib import Path

from cairn.locks import ReentrantLock, locked


def test_shared_holders_coexist_and_exclude_an_exclusive_one(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "one.lock"
    with locked(path, shared=True) as first, locked(path, shared=True, wait=False) as second:
        assert first and second
        with locked(path, wait=False) as exclusive:
            assert not exclusive
    with locked(path, wait=False) as exclusive:
        assert exclusive
        with locked(path, shared=True, wait=False) as shared:
            assert not shared


def test_a_reentrant_lock_nests_in_its_thread_and_excludes_others(tmp_path: Path) -> None:
    path = tmp_path / "mirror.lock"
    assert ReentrantLock.of(path) is ReentrantLock.of(tmp_path / "." / "mirror.lock")
    seen: list[bool] = []
    with ReentrantLock.of(path).held(), ReentrantLock.of(path).held():
        with locked(path, wait=False) as other:
            seen.append(other)
        entered = threading.Event()

        def other_thread() -> None:
            with ReentrantLock.of(path).held():
                entered.set()

        thread = threading.Thread(target=other_thread)
        thread.start()
        assert not entered.wait(0.2)
    thread.join(5)
    assert entered.is_set() and seen == [False]
