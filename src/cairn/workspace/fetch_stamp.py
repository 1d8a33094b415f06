"""When the mirror last fetched its base branch, so a fetch waited for can serve as one's own.

Every job fetches the room's base branch before it starts (its baseline must be the branch
as it is now), under the mirror's fetch lock. Jobs of one room on one host queue there; a
job that waited while another job's fetch ran, and that fetch *started after this job asked*,
would only fetch again what that fetch has just seen: the remote's state it read is no older
than the one a fetch of its own would read.

"Started after" must hold for certain, or a job would build on an old baseline: the stamp
records the start on two clocks, the host's monotonic clock (immune to the wall clock being
set) and the wall clock (immune to a monotonic clock that restarted or was offset: a
snapshot restored, a container in a time namespace of its own), with the boot and the time
namespace that monotonic reading belongs to. A fetch serves a later call only when every one
of them agrees; when any cannot be read or compared, the call fetches. The stamp is removed
before each fetch and written once the fetch is done, so a fetch that never finished leaves
no stamp at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_STAMP = "cairn-fetched"
_LIMIT = 4096


@dataclass(frozen=True)
class Moment:
    """A moment on this host's clocks; `clock` names the monotonic clock it was read from."""

    clock: str
    monotonic: float
    wall: float

    def not_before(self, other: Moment) -> bool:
        """Whether this moment is certainly not earlier than `other`."""
        return (
            self.clock == other.clock
            and self.monotonic >= other.monotonic
            and self.wall >= other.wall
        )


@cache
def _clock() -> str | None:
    """The monotonic clock of this process: its boot and its time namespace."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None  # no way to tell boots apart: every fetch is made afresh
    try:
        namespace = str(os.stat("/proc/self/ns/time").st_ino)
    except FileNotFoundError:
        namespace = "none"  # a kernel without time namespaces
    except OSError:
        return None
    return f"{boot}/{namespace}"


def now() -> Moment | None:
    """This moment, or None where moments of separate processes cannot be compared."""
    clock = _clock()
    return None if clock is None else Moment(clock, time.monotonic(), time.time())


def fetched_since(mirror: Path, repo: str, branch: str, moment: Moment | None) -> bool:
    """Whether a fetch of `branch` from `repo` into `mirror` completed that started after
    `moment` (call holding the fetch lock)."""
    if moment is None:
        return False
    stamp = _read(mirror / _STAMP)
    try:
        started = Moment(str(stamp["clock"]), float(stamp["monotonic"]), float(stamp["wall"]))
        fetched = (str(stamp["repo"]), str(stamp["branch"]))
    except (KeyError, TypeError, ValueError):
        return False
    current = now()
    # No fetch started later than now: a stamp dated ahead (or not a number) is no fetch's.
    possible = current is not None and current.not_before(started)
    return possible and started.not_before(moment) and fetched == (repo, branch)


def forget(mirror: Path) -> None:
    """Remove the stamp before a fetch (call holding the fetch lock)."""
    # A folder there is never read as a stamp: no fetch is taken for another while it is.
    with contextlib.suppress(IsADirectoryError):
        (mirror / _STAMP).unlink(missing_ok=True)


def record(mirror: Path, repo: str, branch: str, started: Moment | None) -> None:
    """Note a fetch that completed and started at `started` (call holding the fetch lock,
    after `forget`). Best effort: without a stamp the next call fetches for itself."""
    if started is None:
        return
    stamp = {
        "clock": started.clock,
        "monotonic": started.monotonic,
        "wall": started.wall,
        "repo": repo,
        "branch": branch,
    }
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(mirror / _STAMP, flags, 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as written:
            json.dump(stamp, written)
    except OSError:  # a full disk: half a stamp is no stamp
        forget(mirror)


def _read(path: Path) -> dict[str, Any]:
    """The stamp's fields; empty when it is missing, not a plain file, or not a stamp."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}  # a folder, or a FIFO that would never answer
        data = os.read(fd, _LIMIT + 1)
    finally:
        os.close(fd)
    try:
        fields = json.loads(data) if len(data) <= _LIMIT else None
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}
