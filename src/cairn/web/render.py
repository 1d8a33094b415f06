"""The pages' templates, and error pages that say what happened through the edge sanitizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from cairn.jobs.policy import REASON_LIMIT
from cairn.sanitize import edge_sanitizer

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
ERROR_LIMIT = 2000

_environment = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def clean(message: str) -> str:
    """One line of user-visible text with paths, tokens and commands masked."""
    return " ".join(edge_sanitizer().clean(message, ERROR_LIMIT).split())


_environment.filters["clean"] = clean
# Forms say how long a reason or review may be, as the use cases bound them.
_environment.globals["reason_limit"] = REASON_LIMIT


def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
    """Render template `name` with the session's user and CSRF token at hand."""
    session = getattr(request.state, "session", None)
    html = _environment.get_template(name).render(
        request=request,
        csrf=session.csrf if session is not None else "",
        me=getattr(request.state, "user", None),
        **values,
    )
    return HTMLResponse(html, status_code=status)


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    """An error as a page: the sanitized message and a way back, never a traceback."""
    return page(request, "error.html", status=status, status_code=status, message=clean(message))
