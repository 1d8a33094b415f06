"""What a user sees of a job: the feed message, the list entry and the detail record.

The views are frozen pydantic models, so that each front end (the CLI's `--json` today, the
HTTP API next) serialises the same shape. Timestamps serialise as `datetime.isoformat()`,
next actions as their structured JSON form (`{"action": "resume", "job": 3}`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import sqlalchemy as sa
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from cairn.canonical import digest
from cairn.engine.effects import EffectStatus
from cairn.engine.ledger import RunStatus
from cairn.jobs.transcript import transcript_summary
from cairn.next_action import NextAction, to_data
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions, effects, progress, stage_runs
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger
from cairn.store.records import Job, Request, RequestStatus, RunKind
from cairn.store.schema import jobs, requests, rooms, users
from cairn.store.store import installation_of

Timestamp = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str)]
NextActions = Annotated[
    tuple[NextAction, ...], PlainSerializer(to_data, return_type=list[dict[str, Any]])
]

_OUTCOME = {
    Status.completed: "Delivered.",
    Status.rejected: "Rejected at review.",
    Status.failed: "Failed.",
    Status.cancelled: "Cancelled.",
}


class View(BaseModel):
    """A read-only view record; one named like a ledger record's fields is read off it."""

    model_config = ConfigDict(frozen=True, from_attributes=True)


class JobSummary(View):
    """The short form of a job, for lists."""

    id: int
    room: str
    status: Status
    stage: Stage
    request: str
    requester: str
    updated_at: Timestamp
    next: NextActions = ()
    """What a person can do about the job's block, in order (empty when nothing is asked)."""


class Review(View):
    summary: str


class StageRunView(View):
    name: Stage = Field(validation_alias="stage")
    status: RunStatus
    attempt: int
    started_at: Timestamp
    ended_at: Timestamp | None
    recipe_id: str
    content_id: str | None
    evidence: dict[str, Any] | None
    reused: Annotated[bool, BeforeValidator(lambda at: at is not None)] = Field(
        validation_alias="reused_at"
    )
    """Taken from a drive's snapshot (at least once) instead of being run again."""


class EventView(View):
    stage: Stage
    status: Status
    at: Timestamp


class DecisionView(View):
    gate: Gate
    verdict: Verdict
    actor: str
    reason: str | None
    policy: str | None
    at: Timestamp


class DependencyRequestView(View):
    id: int
    ecosystem: str
    name: str
    version: str
    reason: str
    status: RequestStatus


class EffectView(View):
    kind: str
    key: str
    status: EffectStatus
    ref: str | None


class UsageView(View):
    agent_runs: int
    corrective_runs: int
    model_requests: int
    input_tokens: int
    output_tokens: int
    seconds: float


class ToolCallView(View):
    name: str
    target: str | None
    """The path or command the call acted on, masked and bounded."""
    status: str
    """ok, or error."""


class TranscriptSummaryView(View):
    """The tool calls the job's conversation made (the first 50), never the model's text."""

    calls: tuple[ToolCallView, ...]
    omitted: int
    """How many more calls were made than are listed."""


class JobDetail(JobSummary):
    """Everything `cairn show` reports; the review only once there is a result to review."""

    kind: str
    branch: str
    baseline: str | None
    result_fingerprint: str | None
    outcome_id: str
    retry_of: int | None
    diagnosis: str | None
    """What happened and what to fix; what to run next is in `next`."""
    feed: str
    review: Review | None
    stages: tuple[StageRunView, ...]
    events: tuple[EventView, ...]
    decisions: tuple[DecisionView, ...]
    dependency_requests: tuple[DependencyRequestView, ...]
    effects: tuple[EffectView, ...]
    usage: UsageView
    agent: dict[str, Any]
    """The agent's stored spec (an adapter's settings; never a key, which a spec cannot hold);
    for the script agent only its step count, since a script's text is the agent's own output
    before cairn masks it."""
    transcript_summary: TranscriptSummaryView
    pull_request: dict[str, Any] | None = None
    """The job's pull request as the forge shows it when asked (`with_pull_request`)."""


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
    """The identity of what a job came to: its result, status, diagnosis and next actions.

    Rule 6: two results with the same body but different diagnoses are different results,
    and so are two that differ only in what they offer to do next.
    """
    what: dict[str, Any] = {
        "result": job.result_fingerprint,
        "status": job.status.value,
        "diagnosis": job.diagnosis,
    }
    if job.next_actions:  # without any, an id stays what it was before next actions existed
        what["next"] = to_data(job.next_actions)
    return digest(what)


def _summaries(conn: sa.Connection, where: Any) -> list[JobSummary]:
    """Job summaries in one query: the request, room and requester joined in."""
    query = (
        sa.select(
            jobs.c.id,
            rooms.c.name.label("room"),
            jobs.c.status,
            jobs.c.stage,
            requests.c.text.label("request"),
            users.c.name.label("requester"),
            jobs.c.updated_at,
            jobs.c.next_actions.label("next"),
        )
        .join(requests, requests.c.id == jobs.c.request_id)
        .join(rooms, rooms.c.id == jobs.c.room_id)
        .join(users, users.c.id == requests.c.requester_id)
        .where(where)
        .order_by(jobs.c.id)
    )
    return [JobSummary.model_validate(dict(row._mapping)) for row in conn.execute(query)]


def job_summaries(conn: sa.Connection, room_id: int | None = None) -> list[JobSummary]:
    """Every job (or a room's), oldest first, fetched in one query."""
    return _summaries(conn, sa.true() if room_id is None else jobs.c.room_id == room_id)


def with_pull_request(conn: sa.Connection, detail: JobDetail, secret_key: str | None) -> JobDetail:
    """`detail` with its pull request as the forge shows it now (asked over the network)."""
    from cairn.jobs.deliver_forge import pull_request_view

    pull = pull_request_view(conn, detail.id, secret_key=secret_key)
    return detail.model_copy(update={"pull_request": pull})


def job_detail(conn: sa.Connection, job_id: int) -> JobDetail:
    """Everything `cairn show` reports; summaries only appear once there is a result to review."""
    job = job_ledger.get_job(conn, job_id)
    [summary] = _summaries(conn, jobs.c.id == job_id)
    request = job_ledger.get_request(conn, job.request_id)
    reviewable = job.stage in (Stage.awaiting_review, Stage.delivering) or job.status.is_terminal
    return JobDetail(
        **dict(summary),
        kind=request.kind,
        branch=job.branch_in(installation_of(conn)),
        baseline=job.baseline,
        result_fingerprint=job.result_fingerprint,
        outcome_id=outcome_id(job),
        retry_of=job.retry_of,
        diagnosis=job.diagnosis,
        feed=feed_message(job, request),
        review=Review(summary=job.summary) if reviewable and job.summary else None,
        stages=tuple(map(StageRunView.model_validate, stage_runs.for_job(conn, job.id))),
        events=tuple(map(EventView.model_validate, progress.events_for_job(conn, job.id))),
        decisions=tuple(map(DecisionView.model_validate, decisions.for_job(conn, job.id))),
        dependency_requests=tuple(
            map(DependencyRequestView.model_validate, dep_ledger.for_job(conn, job.id))
        ),
        effects=tuple(
            EffectView(kind=e.kind, key=e.idempotency_key, status=e.status, ref=e.external_ref)
            for e in effects.for_job(conn, job.id)
        ),
        usage=_usage(conn, job.id),
        agent=agent_view(request.agent),
        transcript_summary=TranscriptSummaryView.model_validate(transcript_summary(conn, job.id)),
    )


def agent_view(spec: dict[str, Any]) -> dict[str, Any]:
    """What `show` reports of a job's agent spec: its settings, never a script's text."""
    if spec.get("adapter") == "script":
        script = spec.get("script")
        steps = script.get("steps") if isinstance(script, dict) else None
        return {"adapter": "script", "steps": len(steps) if isinstance(steps, list) else 0}
    return spec


def _usage(conn: sa.Connection, job_id: int) -> UsageView:
    runs = progress.usage_for_job(conn, job_id)
    return UsageView(
        agent_runs=len(runs),
        corrective_runs=sum(1 for u in runs if u.run_kind is RunKind.corrective),
        model_requests=sum(u.model_requests for u in runs),
        input_tokens=sum(u.input_tokens for u in runs),
        output_tokens=sum(u.output_tokens for u in runs),
        seconds=round(sum(u.seconds for u in runs), 3),
    )
