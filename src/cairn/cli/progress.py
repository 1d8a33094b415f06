"""Live progress for `cairn run` and `cairn work`: stages with timestamps, never logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from cairn.cli.context import console
from cairn.stages import Status

if TYPE_CHECKING:
    from cairn.store.records import Job

_NEXT_STEP = {
    "awaiting_run_approval": (
        "waits for an admin other than the requester to run `cairn approve {id} --as NAME`; "
        "a requester never approves their own run, even as an admin. Alone? Add a second admin "
        "(`cairn user add NAME --admin`) or let the policy approve interactive runs "
        "(`cairn group policy GROUP --run-approval auto --auto-kinds interactive`)"
    ),
    "awaiting_dependency_approval": (
        "an admin runs `cairn approve {id}` or `cairn reject {id} --reason ...`"
    ),
    "awaiting_review": (
        "review with `cairn show {id}`, then `cairn approve {id}` "
        "or `cairn reject {id} --reason ...`"
    ),
}


_STYLE = {
    Status.completed: "green",
    Status.waiting: "yellow",
    Status.blocked: "red",
    Status.failed: "red",
}


class StagePrinter:
    """Prints one line per stage a job enters, with the time it entered it."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[str, str]] = {}

    def __call__(self, job: Job) -> None:
        key = (job.stage.value, job.status.value)
        if self._last.get(job.id) == key:
            return
        self._last[job.id] = key
        line = Text.assemble(
            (job.updated_at.strftime("%H:%M:%S"), "dim"),
            f"  job {job.id}  ",
            (job.stage.value, _STYLE.get(job.status, "")),
            f" ({job.status})",
        )
        console.print(line)


def next_step(job: Job) -> str | None:
    """What a person does next for a job that stopped driving, if anything."""
    if job.status is Status.waiting:
        return _NEXT_STEP[job.stage.value].format(id=job.id)
    if job.status is Status.blocked:
        return f"fix what the diagnosis says, then `cairn resume {job.id}`"
    return None
