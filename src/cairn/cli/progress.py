"""Live progress for `cairn run` and `cairn work`: stages with timestamps, never logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from cairn.cli.context import console
from cairn.stages import Status

if TYPE_CHECKING:
    from cairn.store.records import Job

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
