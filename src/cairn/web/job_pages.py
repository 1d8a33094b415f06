"""A job's detail page and the decisions taken from it, through the API's own use-case routes.

Every action calls the function the HTTP API's route calls (`cairn.api.routes_jobs`), with the
signed-in user: the pages have no authority path of their own.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from cairn.api import events as api_events
from cairn.api import routes_jobs, visibility
from cairn.api.schemas import ApproveBody, RejectBody, ReplyBody, SubmitBody
from cairn.jobs.policy import REASON_LIMIT
from cairn.sanitize import CUT_MARKER
from cairn.stages import Stage, Status
from cairn.store import identity, progress
from cairn.store import jobs as job_ledger
from cairn.store.records import Role, User
from cairn.store.rooms import get_room
from cairn.store.store import installation_of
from cairn.web.access import CheckedForm, PageUser, served_of, signed_in
from cairn.web.diffs import result_diff, split_files
from cairn.web.render import error_page, page
from cairn.web.review import review_message

router = APIRouter(include_in_schema=False)
Id = Annotated[int, Path(ge=1, le=2**31 - 1)]
Text = Annotated[str, Form(max_length=300_000)]
Reason = Annotated[str, Form(max_length=REASON_LIMIT)]
NEEDS_REASON = "a rejection needs a reason: write why in the reason field, then reject again"
GATE_OF_STAGE = {
    Stage.awaiting_run_approval: "run",
    Stage.awaiting_dependency_approval: "dependency",
    Stage.awaiting_review: "integration",
}


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: Id, user: PageUser) -> Response:
    """The job's stages, decisions, gates, tool calls and (once there is one) its diff."""
    served = served_of(request)
    values = _progress(request, job_id, user)
    job, room = values.pop("record"), values["room"]
    with served.store.begin() as conn:
        installation = installation_of(conn)
    diff = result_diff(served, job, room, installation) if values["job"].review else None
    return page(
        request,
        "job.html",
        **values,
        files=split_files(diff) if diff else [],
        diff_cut=bool(diff and diff.endswith(CUT_MARKER)),
        can_reply=job.stage is Stage.awaiting_review and job.status is Status.waiting,
    )


@router.get("/jobs/{job_id}/progress", response_class=HTMLResponse)
def job_progress(request: Request, job_id: Id, user: PageUser) -> Response:
    """The job's stage, gate, timeline and decisions: what a progress event re-fetches."""
    values = _progress(request, job_id, user)
    values.pop("record")
    return page(request, "progress.html", **values)


@router.get("/jobs/{job_id}/events")
def job_events(
    request: Request,
    job_id: Id,
    user: PageUser,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> EventSourceResponse:
    """The job's progress stream (the API's own), for the page's session instead of a token."""
    return api_events.job_events(job_id, request, served_of(request), user, last=str(after))


def _progress(request: Request, job_id: int, user: User) -> dict[str, Any]:
    served = served_of(request)
    detail = routes_jobs.show_job(job_id, served, user)
    with served.store.begin() as conn:
        job = job_ledger.get_job(conn, job_id)
        room = get_room(conn, job.room_id)
        member = identity.membership(conn, room.group_id, user.id)
        seqs = [event.id for event in progress.events_for_job(conn, job_id)]
    return {
        "record": job,
        "job": detail,
        "room": room,
        "gate": GATE_OF_STAGE.get(job.stage) if job.status is Status.waiting else None,
        "admin": member is not None and member.role is Role.admin,
        "last_seq": max(seqs, default=0),
    }


@router.post("/jobs/{job_id}/approve", dependencies=[CheckedForm])
def approve(request: Request, job_id: Id, user: PageUser, reason: Reason = "") -> Response:
    """Approve the gate the job waits at, as the signed-in person."""
    body = ApproveBody(reason=reason.strip() or None)
    routes_jobs.approve(job_id, served_of(request), user, body)
    return _back(job_id)


@router.post("/jobs/{job_id}/reject", dependencies=[CheckedForm])
def reject(request: Request, job_id: Id, user: PageUser, reason: Reason = "") -> Response:
    """Reject at the gate the job waits at; the reason is required and recorded."""
    if not reason.strip():
        return error_page(request, 422, NEEDS_REASON)
    body = RejectBody(reason=reason.strip())
    routes_jobs.reject(job_id, body, served_of(request), user)
    return _back(job_id)


@router.post("/jobs/{job_id}/reply", dependencies=[CheckedForm])
async def reply(request: Request, job_id: Id) -> Response:
    """Send the line comments and the message back to the agent as one review (`reply`)."""
    user = await run_in_threadpool(signed_in, request)
    form = await request.form()
    fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
    message = review_message(fields)
    if not message:
        return error_page(
            request, 422, "the review is empty: comment on a line or write a message first"
        )
    try:
        body = ReplyBody(message=message, fresh=fields.get("fresh") == "on")
    except ValidationError:
        return error_page(request, 422, "the review is too long; shorten it and send it again")
    await run_in_threadpool(routes_jobs.reply, job_id, body, served_of(request), user)
    return _back(job_id)


@router.get("/new", response_class=HTMLResponse)
def new_request_page(request: Request, user: PageUser, room: str = "") -> Response:
    """The new-request form: a room of yours, the request, and optionally a script agent."""
    with served_of(request).store.begin() as conn:
        rooms = visibility.visible_rooms(conn, user)
    return page(request, "new.html", rooms=rooms, chosen=room)


@router.post("/new", dependencies=[CheckedForm])
def new_request(
    request: Request,
    user: PageUser,
    room: Annotated[str, Form(max_length=64)] = "",
    text: Text = "",
    script: Text = "",
) -> Response:
    """Submit the request as the signed-in person; the job's page follows."""
    try:
        body = SubmitBody.model_validate(
            {"room": room, "request": text.strip(), "script": script.strip() or None}
        )
    except ValidationError as exc:
        fields = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")})
        words = {
            "room": "choose a room",
            "request": "write what to do (at most 20,000 characters)",
            "script": "the script is not valid text",
        }
        return error_page(
            request, 422, "the request was not sent: " + "; ".join(words.get(f, f) for f in fields)
        )
    made = routes_jobs.submit(body, served_of(request), user)
    return _back(made.id)


def _back(job_id: int) -> Response:
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)
