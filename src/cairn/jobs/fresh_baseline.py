"""Blocks whose cause lies in the repository: resuming one takes a fresh baseline.

A job blocked because the repository lacks something (a `pyproject.toml` for an approved
package, a lockfile that disagrees with its declarations) cannot be unblocked by resuming on
the same baseline: the owner's fix is a new commit. Such a block carries `REPOSITORY_CAUSE`
in its stage run's evidence; `cairn resume` then clears the job's baseline, so the runner
fetches the base branch again and moves the job's workspace (and any work already in it)
onto the new baseline.
"""

from __future__ import annotations

import sqlalchemy as sa

from cairn.engine import Measurement
from cairn.jobs.ledger import run_record
from cairn.store import stage_runs
from cairn.store.records import Job

REPOSITORY_CAUSE = Measurement("cause", "repository")
"""Evidence of a block whose cause lies in the repository."""


def blocked_by_repository(conn: sa.Connection, job: Job) -> bool:
    """Whether the job's latest stage run ended on a block whose cause lies in the repository."""
    runs = stage_runs.for_job(conn, job.id)
    latest = run_record(runs[-1]) if runs else None
    return (
        latest is not None and latest.evidence.get(REPOSITORY_CAUSE.name) == REPOSITORY_CAUSE.value
    )


def resume_note(job: Job, base_branch: str) -> str:
    """What the resume decision records about the fresh baseline it asks for."""
    return (
        f"what blocked job {job.id} lies in the repository, so the job takes a fresh baseline "
        f"of {base_branch}; the work already in its workspace moves onto it"
    )
