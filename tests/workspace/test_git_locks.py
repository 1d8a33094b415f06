"""Locks a killed git left: removed once stale, waited for while young, never for long."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from cairn.workspace.git_locks import clear_stale


def _plant(path: Path, age: float) -> Path:
    path.write_text("a git's lock\n")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_a_lock_older_than_the_limit_goes_at_once(tmp_path: Path) -> None:
    lock = _plant(tmp_path / "packed-refs.lock", age=60)
    started = time.monotonic()
    assert clear_stale([lock, tmp_path / "absent.lock"], 30) == ["packed-refs.lock"]
    assert not lock.exists() and time.monotonic() - started < 1


def test_a_young_lock_is_waited_for_until_its_git_lets_go(tmp_path: Path) -> None:
    lock = _plant(tmp_path / "index.lock", age=0)
    threading.Timer(0.3, lock.unlink).start()
    started = time.monotonic()
    assert clear_stale([lock], 30) == []
    assert 0.3 <= time.monotonic() - started < 5


def test_a_lock_dated_in_the_future_is_waited_for_no_longer_than_the_limit(
    tmp_path: Path,
) -> None:
    lock = _plant(tmp_path / "HEAD.lock", age=-3600)  # the clock was set back an hour
    started = time.monotonic()
    assert clear_stale([lock], 0.5) == ["HEAD.lock"]
    assert time.monotonic() - started < 2


def test_waiting_ends_when_asked_to_stop(tmp_path: Path) -> None:
    lock = _plant(tmp_path / "HEAD.lock", age=0)
    started = time.monotonic()
    assert clear_stale([lock], 30, stop=lambda: time.monotonic() - started > 0.3) == []
    assert lock.exists() and time.monotonic() - started < 2


def test_looks_and_removals_are_made_holding_the_given_lock(tmp_path: Path) -> None:
    lock = _plant(tmp_path / "packed-refs.lock", age=0)
    holder = threading.Lock()
    looks: list[bool] = []

    class Held:
        def __enter__(self) -> None:
            holder.acquire()

        def __exit__(self, *exc: object) -> None:
            looks.append(lock.exists())
            holder.release()

    assert clear_stale([lock], 0.3, held=Held) == ["packed-refs.lock"]
    assert len(looks) >= 2 and looks[-1] is False, "waited outside, removed inside"


def test_a_folder_of_that_name_or_a_file_where_git_needs_a_folder_is_no_lock(
    tmp_path: Path,
) -> None:
    (tmp_path / "refs.lock").mkdir()  # git never locks with a folder: someone else's
    branch = _plant(tmp_path / "cairn", age=60)  # refs/heads/cairn: a branch, not a folder
    assert clear_stale([tmp_path / "refs.lock", branch / "job-1.lock"], 1) == []
    assert (tmp_path / "refs.lock").is_dir() and branch.is_file()


def test_with_no_lock_there_the_given_lock_is_not_taken(tmp_path: Path) -> None:
    taken: list[bool] = []

    class Held:
        def __enter__(self) -> None:
            taken.append(True)

        def __exit__(self, *exc: object) -> None:
            pass

    (tmp_path / "refs.lock").mkdir()  # a folder: no lock
    assert clear_stale([tmp_path / "absent.lock", tmp_path / "refs.lock"], 30, held=Held) == []
    assert taken == [], "runners queued on the mirror's lock to find nothing"
    _plant(tmp_path / "absent.lock", age=60)
    assert clear_stale([tmp_path / "absent.lock"], 30, held=Held) == ["absent.lock"]
    assert taken == [True]
