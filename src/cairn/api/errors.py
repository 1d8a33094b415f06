"""cairn's errors as HTTP answers: one handler, one status per kind, one sanitized JSON body.

No answer carries a traceback, a path, a token or what the client sent: a validation error
names the field and what is wrong with it, never the value.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.api.auth import Unauthenticated
from cairn.api.schemas import ErrorBody
from cairn.errors import (
    CairnError,
    ContextConflict,
    InvalidState,
    LeaseLost,
    NotAllowed,
    NotFound,
    ScriptError,
    StoreError,
    UsageError,
)
from cairn.next_action import to_data
from cairn.sanitize import edge_sanitizer

log = logging.getLogger("cairn.api")

# Most specific first: LeaseLost and ContextConflict are StoreErrors, but conflicts.
STATUS: tuple[tuple[type[CairnError], int], ...] = (
    (Unauthenticated, 401),
    (NotAllowed, 403),
    (NotFound, 404),
    (InvalidState, 409),
    (LeaseLost, 409),
    (ContextConflict, 409),
    (UsageError, 422),
    (ScriptError, 422),
    (StoreError, 503),
)


def _error(message: str) -> ErrorBody:
    return ErrorBody(error=" ".join(edge_sanitizer().clean(message, 2000).split()))


def _answer(status: int, body: ErrorBody) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def status_of(exc: CairnError) -> int:
    """The HTTP status of one of cairn's errors (500 for one not in the table)."""
    return next((code for kind, code in STATUS if isinstance(exc, kind)), 500)


async def _cairn_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CairnError)
    body = _error(str(exc))
    body.next = list(to_data(exc.next_actions))
    return _answer(status_of(exc), body)


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [_problem(e) for e in exc.errors()[:5]]
    return _answer(422, _error("the request is not valid: " + "; ".join(problems)))


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
    return f"{where}: {error.get('msg', 'invalid')}"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else "the request was refused"
    return _answer(exc.status_code, _error(detail))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the server's log (the operator's), never into the answer.
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _answer(500, _error("cairn hit an unexpected error; the server log says more"))


def install(app: FastAPI) -> None:
    """Register the handlers on `app`."""
    app.add_exception_handler(CairnError, _cairn_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI declaration of the errors a route answers with."""
    words = {
        400: "Malformed request",
        401: "Missing or unknown token",
        403: "Not allowed",
        404: "No such job, room or group",
        409: "The job is not at a point where this makes sense",
        413: "Request body too large",
        422: "Invalid input",
        503: "The store is unavailable",
    }
    return {code: {"model": ErrorBody, "description": words[code]} for code in codes}
