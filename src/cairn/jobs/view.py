"""What a user sees of a job: the feed message and the detail record."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from cairn.engine import digest
from cairn.stages import Stage, Status
from cairn.store import decisions, effects, progress, stage_runs
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_user
from cairn.store.records import Job, Request
from cairn.store.rooms import get_room
from cairn.store.store import installation_of

_OUTCOME = {
    Status.completed: "Delivered.",
    Status.rejected: "Rejected at review.",
    Status.failed: "Failed.",
    Status.cancelled: "Cancelled.",
}


def feed_message(job: Job, request: Request) -> str:
    """The room feed's one message for a job: provisional (request and stage) until it ends."""
    if not job.status.is_terminal:
        return f"{request.text}\n\n[{job.stage}]"
    lines = [request.text, "", _OUTCOME[job.status]]
    if job.status is Status.completed and job.summary:
        lines += ["", job.summary]
    if job.diagnosis:
        lines += ["", job.diagnosis]
    return "\n".join(lines)


def outcome_id(job: Job) -> str:
    """The identity of what a job came to: its result, status and diagnosis together.

    Rule 6: two results with the same body but different diagnoses are different results.
    """
    return digest(
        {"result": job.result_fingerprint, "status": job.status.value, "diagnosis": job.diagnosis}
    )


def job_summary(conn: sa.Connection, job: Job) -> dict[str, Any]:
    """The short form of a job, for lists."""
    request = job_ledger.get_request(conn, job.request_id)
    return {
        "id": job.id,
        "room": get_room(conn, job.room_id).name,
        "status": job.status.value,
        "stage": job.stage.value,
        "request": request.text,
        "requester": get_user(conn, request.requester_id).name,
        "updated_at": _iso(job.updated_at),
    }


def job_detail(conn: sa.Connection, job_id: int) -> dict[str, Any]:
    """Everything `cairn show` reports; summaries only appear once there is a result to review."""
    job = job_ledger.get_job(conn, job_id)
    request = job_ledger.get_request(conn, job.request_id)
    reviewable = job.stage in (Stage.awaiting_review, Stage.delivering) or job.status.is_terminal
    return job_summary(conn, job) | {
        "kind": request.kind,
        "branch": job.branch_in(installation_of(conn)),
        "baseline": job.baseline,
        "result_fingerprint": job.result_fingerprint,
        "outcome_id": outcome_id(job),
        "retry_of": job.retry_of,
        "diagnosis": job.diagnosis,
        "feed": feed_message(job, request),
        "review": {"summary": job.summary} if reviewable and job.summary else None,
        "stages": [_stage_run(run) for run in stage_runs.for_job(conn, job.id)],
        "events": [
            {"stage": e.stage, "status": e.status, "at": _iso(e.at)}
            for e in progress.events_for_job(conn, job.id)
        ],
        "decisions": [
            {
                "gate": d.gate,
                "verdict": d.verdict,
                "actor": d.actor,
                "reason": d.reason,
                "policy": d.policy,
                "at": _iso(d.at),
            }
            for d in decisions.for_job(conn, job.id)
        ],
        "dependency_requests": [
            {
                "id": d.id,
                "ecosystem": d.ecosystem,
                "name": d.name,
                "version": d.version,
                "reason": d.reason,
                "status": d.status,
            }
            for d in dep_ledger.for_job(conn, job.id)
        ],
        "effects": [
            {"kind": e.kind, "key": e.idempotency_key, "status": e.status, "ref": e.external_ref}
            for e in effects.for_job(conn, job.id)
        ],
        "usage": _usage(conn, job.id),
    }


def _stage_run(run: stage_runs.StageRun) -> dict[str, Any]:
    return {
        "name": run.stage,
        "status": run.status,
        "attempt": run.attempt,
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
        "recipe_id": run.recipe_id,
        "content_id": run.content_id,
        "evidence": run.evidence,
        # Taken from a drive's snapshot (at least once) instead of being run again.
        "reused": run.reused_at is not None,
    }


def _usage(conn: sa.Connection, job_id: int) -> dict[str, Any]:
    runs = progress.usage_for_job(conn, job_id)
    return {
        "agent_runs": len(runs),
        "corrective_runs": sum(1 for u in runs if u.run_kind == "corrective"),
        "seconds": round(sum(u.seconds for u in runs), 3),
        "input_tokens": sum(u.input_tokens for u in runs),
        "output_tokens": sum(u.output_tokens for u in runs),
    }


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None
