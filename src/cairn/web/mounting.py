"""Putting the pages on the API's app: routers, static files, and errors answered as pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.api.errors import status_of
from cairn.errors import CairnError
from cairn.web import job_pages, onboarding, pages
from cairn.web.access import ForgeApp, NeedSignIn, WebState
from cairn.web.render import STATIC, error_page
from cairn.web.sessions import OAuthStates, Sessions, SignInLimit

Handler = Callable[[Request, Exception], Awaitable[Response]]
API_PREFIXES = ("/api/", "/openapi.json")


def mount(app: FastAPI, *, forge_app: ForgeApp | None = None) -> None:
    """Serve the pages and /static on `app`; errors off the API's paths answer as pages."""
    app.state.web = WebState(
        sessions=Sessions(),
        sign_in_limit=SignInLimit(),
        oauth_states=OAuthStates(),
        forge_app=forge_app,
    )
    for router in (pages.router, job_pages.router, onboarding.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    for kind in (CairnError, RequestValidationError, StarletteHTTPException, Exception):
        api_handler = cast("Handler | None", app.exception_handlers.get(kind))
        app.add_exception_handler(kind, _page_or(api_handler))


def _page_or(api_handler: Handler | None) -> Handler:
    async def handle(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith(API_PREFIXES) and api_handler is not None:
            return await api_handler(request, exc)
        if isinstance(exc, NeedSignIn):
            if request.headers.get("hx-request") == "true":
                # A fragment's fetch: htmx turns this into a whole-page visit to sign in.
                return Response(status_code=401, headers={"HX-Redirect": "/signin"})
            return RedirectResponse("/signin", status_code=303)
        if isinstance(exc, CairnError):
            return error_page(request, status_of(exc), str(exc))
        if isinstance(exc, RequestValidationError):
            return error_page(request, 422, "the page's address or form is not valid")
        if isinstance(exc, StarletteHTTPException):
            detail = exc.detail if isinstance(exc.detail, str) else "the request was refused"
            return error_page(request, exc.status_code, detail)
        if api_handler is not None:  # the API's handler logs the unexpected error
            await api_handler(request, exc)
        return error_page(request, 500, "cairn hit an unexpected error; the server log says more")

    return handle
