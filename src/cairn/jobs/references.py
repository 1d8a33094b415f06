"""Rule 8: what a scheduled job's fresh context starts from, besides its request.

The repository's own documents (README, AGENTS.md, CONTRIBUTING.md, when the job's workspace
holds them), each bounded and masked, and at most the previous scheduled run's result
summary and diffstat: never an earlier run's conversation, so nothing accumulates from one
run to the next. The previous run is the same schedule's last job before this one, else
(a schedule removed and added again) the last scheduled job in the room with the same request
and requester whose own schedule is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from cairn.agents.tools.files import ToolStatus, read_file
from cairn.sanitize import bound
from cairn.store import jobs as job_ledger
from cairn.store import schedules
from cairn.store.records import Job
from cairn.store.schema import jobs, requests, schedule_firings

if TYPE_CHECKING:
    from cairn.jobs.drive import Drive

DOCUMENTS = (
    ("README", ("README.md", "README.rst", "README.txt", "README")),
    ("AGENTS.md", ("AGENTS.md",)),
    ("CONTRIBUTING.md", ("CONTRIBUTING.md", "CONTRIBUTING.rst", "CONTRIBUTING")),
)
"""Each document and the file names it may have, first match wins."""
DOCUMENT_LIMIT = 4_000
"""The most of one document the references carry (the rest is marked as cut)."""
PREVIOUS_LIMIT = 3_000
"""The most of the previous run's summary and diffstat the references carry."""
REFERENCES_LIMIT = 16_000
"""The most the whole reference set holds."""


def scheduled_references(drive: Drive) -> str | None:
    """The bounded reference set a scheduled job's turn starts with; None for other jobs."""
    if drive.request.kind != "scheduled":
        return None
    parts = [_documents(drive), _previous_run(drive)]
    return bound("\n\n".join(part for part in parts if part), REFERENCES_LIMIT)


def _documents(drive: Drive) -> str:
    found = []
    for _, names in DOCUMENTS:
        for name in names:
            # The agents' own symlink-safe reader: a README linked out of the workspace is
            # refused like any path outside it.
            read = read_file(drive.worktree.path, name)
            if read.status is ToolStatus.ok:
                text = bound(drive.sanitizer.mask(read.text).strip(), DOCUMENT_LIMIT)
                found.append(f"--- {name} ---\n{text}")
                break
    if not found:
        return "The repository has no README, AGENTS.md or CONTRIBUTING.md."
    return "The repository's own documents (each shortened if long):\n\n" + "\n\n".join(found)


def _previous_run(drive: Drive) -> str:
    with drive.store.read() as conn:
        previous = previous_scheduled_job(conn, drive.job, drive.request.text)
    if previous is None:
        return "This is the first run of this scheduled request."
    # Only what cairn wrote of its result (the agent's summary fenced, cairn's own diffstat):
    # the earlier job's conversation and steps are never read here.
    if not previous.summary:
        return f"The previous run (job {previous.id}, {previous.status}) left no result summary."
    summary = bound(drive.sanitizer.mask(previous.summary).strip(), PREVIOUS_LIMIT)
    return f"The previous run (job {previous.id}, {previous.status}) left:\n{summary}"


def previous_scheduled_job(conn: sa.Connection, job: Job, request_text: str) -> Job | None:
    """The previous run of the same schedule, else of a removed schedule it was added again as.

    The fallback (same room, same request text) finds what a schedule removed and added again
    last did: its firings went with it, so its jobs belong to no schedule. It takes only such
    jobs, of the same requester. A job that another live schedule made is that schedule's
    run, not this one's, and another requester's result summary is not this requester's to
    start from: the first run of a schedule never begins from another schedule's run.
    """
    firing = schedules.firing_of_job(conn, job.id)
    earlier = schedules.earlier_job(conn, firing.schedule_id, job.id) if firing else None
    if earlier is None:
        requester = job_ledger.get_request(conn, job.request_id).requester_id
        query = (
            sa.select(sa.func.max(jobs.c.id))
            .select_from(
                jobs.join(requests, jobs.c.request_id == requests.c.id).outerjoin(
                    schedule_firings, schedule_firings.c.job_id == jobs.c.id
                )
            )
            .where(
                jobs.c.room_id == job.room_id,
                jobs.c.id < job.id,
                requests.c.kind == "scheduled",
                requests.c.text == request_text,
                requests.c.requester_id == requester,
                schedule_firings.c.id.is_(None),
            )
        )
        earlier = conn.execute(query).scalar()
    return job_ledger.get_job(conn, int(earlier)) if earlier is not None else None
