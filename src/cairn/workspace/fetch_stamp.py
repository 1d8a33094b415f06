"""When the mirror last fetched its base branch, so a fetch waited for can serve as one's own.

Every job fetches the room's base branch before it starts (its baseline must be the branch
as it is now), under the mirror's fetch lock. Jobs of one room on one host queue there; a
job that waited while another job's fetch ran, and that fetch *started after this job asked*,
would only fetch again what that fetch has just seen: the remote's state it read is no older
than the one a fetch of its own would read. The stamp records that start, on the host-wide
monotonic clock of this boot, beside what was fetched (address and branch).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_STAMP = "cairn-fetched"


@dataclass(frozen=True)
class Moment:
    """A point on this host's monotonic clock, valid for the boot it was read in."""

    boot: str
    at: float


@cache
def _boot() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None  # no way to tell boots apart: every fetch is made afresh


def now() -> Moment | None:
    """This moment, or None where moments of separate processes cannot be compared."""
    boot = _boot()
    return None if boot is None else Moment(boot, time.monotonic())


def fetched_since(mirror: Path, repo: str, branch: str, moment: Moment | None) -> bool:
    """Whether a fetch of `branch` from `repo` into `mirror` completed that started after
    `moment` (call holding the fetch lock)."""
    if moment is None:
        return False
    try:
        stamp = json.loads((mirror / _STAMP).read_text(encoding="utf-8"))
        started = Moment(str(stamp["boot"]), float(stamp["at"]))
        fetched = (str(stamp["repo"]), str(stamp["branch"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return started.boot == moment.boot and started.at >= moment.at and fetched == (repo, branch)


def record(mirror: Path, repo: str, branch: str, started: Moment | None) -> None:
    """Note a fetch that completed and started at `started` (call holding the fetch lock)."""
    if started is None:
        return
    stamp = {"boot": started.boot, "at": started.at, "repo": repo, "branch": branch}
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=mirror, prefix=f".{_STAMP}-", delete=False
    ) as written:
        json.dump(stamp, written)
    os.replace(written.name, mirror / _STAMP)
