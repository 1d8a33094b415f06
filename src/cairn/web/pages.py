"""Signing in and out, the rooms, and a room's feed: one status card per job, kept live.

A card shows only the request and the current stage until its job ends (rule 2); the page's
script re-fetches a card when the room's progress stream says its job moved, and falls back
to polling when the stream fails.
"""

from __future__ import annotations

from typing import Annotated

import sqlalchemy as sa
from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sse_starlette import EventSourceResponse

from cairn.api import events as api_events
from cairn.api import visibility
from cairn.api.auth import user_for_token
from cairn.jobs.view import feed_message
from cairn.store import jobs as job_ledger
from cairn.store.identity import get_user
from cairn.store.records import Job
from cairn.store.schema import events, jobs
from cairn.web.access import (
    CheckedForm,
    PageUser,
    current_session,
    served_of,
    web_state,
)
from cairn.web.render import error_page, page
from cairn.web.sessions import COOKIE, SIGN_IN_LIMIT, Session

router = APIRouter(include_in_schema=False)
Id = Annotated[int, Path(ge=1, le=2**31 - 1)]
TOO_MANY = (
    f"too many sign-in attempts from your address (at most {SIGN_IN_LIMIT} a minute); "
    "wait a minute and try again"
)
REFUSED = "that token belongs to no one; paste the token `cairn user add` printed for you"


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> Response:
    """Signed in: the rooms; otherwise the sign-in page."""
    session = current_session(request)
    target = "/rooms" if session is not None and session.user_id is not None else "/signin"
    return RedirectResponse(target, status_code=303)


@router.get("/signin", response_class=HTMLResponse)
def sign_in_page(request: Request) -> Response:
    """The sign-in form, under an anonymous session whose CSRF token the form carries."""
    session = current_session(request) or web_state(request).sessions.start()
    request.state.session = session
    return _with_cookie(request, page(request, "signin.html"), session)


@router.post("/signin", response_class=HTMLResponse, dependencies=[CheckedForm])
def sign_in(request: Request, token: Annotated[str, Form(max_length=200)] = "") -> Response:
    """Trade a valid token for a new signed-in session; the token itself is not kept."""
    state = web_state(request)
    address = request.client.host if request.client else "unknown"
    if not state.sign_in_limit.allow(address):
        return error_page(request, 429, TOO_MANY)
    user = user_for_token(served_of(request).store, token.strip()) if token.strip() else None
    if user is None:
        return page(request, "signin.html", status=401, problem=REFUSED)
    old = current_session(request)
    if old is not None:
        state.sessions.end(old.id)
    session = state.sessions.start(user.id)
    return _with_cookie(request, RedirectResponse("/rooms", status_code=303), session)


@router.post("/signout", dependencies=[CheckedForm])
def sign_out(request: Request) -> Response:
    """End the session; the cookie is cleared too."""
    session = current_session(request)
    if session is not None:
        web_state(request).sessions.end(session.id)
    answer = RedirectResponse("/signin", status_code=303)
    answer.delete_cookie(COOKIE, path="/")
    return answer


@router.get("/rooms", response_class=HTMLResponse)
def rooms(request: Request, user: PageUser) -> Response:
    """The rooms of the signed-in person's groups."""
    with served_of(request).store.begin() as conn:
        groups = {group.id: group.name for group in visibility.groups_of(conn, user)}
        found = visibility.visible_rooms(conn, user)
    return page(request, "rooms.html", rooms=found, groups=groups)


@router.get("/rooms/{room_id}", response_class=HTMLResponse)
def feed(request: Request, room_id: Id, user: PageUser) -> Response:
    """A room's feed: a card per job, newest first, and where its progress stream starts."""
    with served_of(request).store.begin() as conn:
        room = visibility.require_room(conn, user, room_id)
        cards = [_card(conn, job) for job in reversed(job_ledger.list_jobs(conn, room.id))]
        last = conn.execute(
            sa.select(sa.func.max(events.c.id)).where(
                events.c.job_id.in_(sa.select(jobs.c.id).where(jobs.c.room_id == room.id))
            )
        ).scalar()
    return page(request, "feed.html", room=room, cards=cards, after=last or 0)


@router.get("/rooms/{room_id}/cards", response_class=HTMLResponse)
def feed_cards(request: Request, room_id: Id, user: PageUser) -> Response:
    """Every card of the room's feed, for a poll or a job the page has not seen."""
    with served_of(request).store.begin() as conn:
        room = visibility.require_room(conn, user, room_id)
        cards = [_card(conn, job) for job in reversed(job_ledger.list_jobs(conn, room.id))]
    return page(request, "cards.html", cards=cards)


@router.get("/jobs/{job_id}/card", response_class=HTMLResponse)
def card(request: Request, job_id: Id, user: PageUser) -> Response:
    """One job's card, re-read from the ledger (access re-checked)."""
    with served_of(request).store.begin() as conn:
        visibility.require_job(conn, user, job_id)
        found = _card(conn, job_ledger.get_job(conn, job_id))
    return page(request, "card.html", card=found)


@router.get("/rooms/{room_id}/events")
def room_events(
    request: Request,
    room_id: Id,
    user: PageUser,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> EventSourceResponse:
    """The room's progress stream (the API's own), for the page's session instead of a token."""
    served = served_of(request)
    return api_events.room_events(room_id, request, served, user, last=str(after))


def _card(conn: sa.Connection, job: Job) -> dict[str, object]:
    """What a card shows: until the job ends, only its request and current stage (rule 2)."""
    request = job_ledger.get_request(conn, job.request_id)
    ended = job.status.is_terminal
    return {
        "id": job.id,
        "request": request.text,
        "requester": get_user(conn, request.requester_id).name,
        "stage": job.stage.value,
        "status": job.status.value,
        "ended": ended,
        "outcome": feed_message(job, request).split("\n\n", 1)[1] if ended else None,
    }


def _with_cookie(request: Request, answer: Response, session: Session) -> Response:
    answer.set_cookie(
        COOKIE,
        session.id,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return answer
