"""Who is signed in, for the pages: the session cookie's user, re-read from the store each time.

Every form post also carries the session's CSRF token, checked before the route runs; reads
(GET) change nothing and need none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from cairn.api.deps import Served
from cairn.errors import CairnError, NotAllowed, NotFound, UsageError
from cairn.store import identity
from cairn.store.records import User
from cairn.web.sessions import COOKIE, OAuthStates, Session, Sessions, SignInLimit


class NeedSignIn(CairnError):
    """No session, or one nobody signed in to (the page sends the person to sign in)."""


class BadForm(NotAllowed):
    """A form post without this session's CSRF token (answered 403)."""


OAUTH_SETTINGS = ("kind", "url", "client_id", "client_secret")


@dataclass(frozen=True)
class ForgeApp:
    """The forge OAuth app that repository onboarding authorizes through."""

    kind: str
    url: str
    """The forge's web base (its token endpoint, and the rooms' --forge-url)."""
    client_id: str
    client_secret: str = field(repr=False)
    """Where people authorize, when not the forge's own /login/oauth/authorize."""

    @property
    def authorize_url(self) -> str:
        return f"{self.url.rstrip('/')}/login/oauth/authorize"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ForgeApp | None:
        """The app `cairn serve` is given in CAIRN_FORGE_OAUTH_* (None when none is set)."""
        names = {key: f"CAIRN_FORGE_OAUTH_{key.upper()}" for key in OAUTH_SETTINGS}
        found = {key: environ.get(name, "").strip() for key, name in names.items()}
        if not any(found.values()):
            return None
        missing = [names[key] for key in ("client_id", "client_secret") if not found[key]]
        if missing:
            raise UsageError(
                f"a forge OAuth app for the web pages also needs {' and '.join(missing)}; set "
                "them (the app's client id and secret, from the forge's developer settings)"
            )
        from cairn.forges.registry import DEFAULT_URLS, check_kind

        kind = found["kind"] or "github"
        check_kind(kind)
        if kind != "github":
            # GitLab's OAuth endpoints and token exchange differ; rooms there are connected
            # with the CLI until the pages learn them.
            raise UsageError(
                "the web pages authorize GitHub OAuth apps only; leave CAIRN_FORGE_OAUTH_KIND "
                "unset (or github), and connect GitLab rooms with `cairn room create --forge`"
            )
        return cls(
            kind=kind,
            url=(found["url"] or DEFAULT_URLS[kind]).rstrip("/"),
            client_id=found["client_id"],
            client_secret=found["client_secret"],
        )


@dataclass
class WebState:
    """What the pages share: the sessions, the sign-in limit, the onboarding's OAuth app."""

    sessions: Sessions
    sign_in_limit: SignInLimit
    oauth_states: OAuthStates
    forge_app: ForgeApp | None = None


def web_state(request: Request) -> WebState:
    found = request.app.state.web
    assert isinstance(found, WebState), "cairn.web.mount sets it"
    return found


def served_of(request: Request) -> Served:
    found = request.app.state.served
    assert isinstance(found, Served), "create_app sets it"
    return found


def current_session(request: Request) -> Session | None:
    """The request's live session, remembered on `request.state` for the templates."""
    session = web_state(request).sessions.get(request.cookies.get(COOKIE))
    request.state.session = session
    return session


def signed_in(request: Request) -> User:
    """The signed-in user; NeedSignIn when there is none (or they were removed since)."""
    session = current_session(request)
    if session is None or session.user_id is None:
        raise NeedSignIn("sign in with your cairn token to see this page")
    with served_of(request).store.begin() as conn:
        try:
            user = identity.get_user(conn, session.user_id)
        except NotFound:
            raise NeedSignIn("sign in again: your user no longer exists") from None
    request.state.user = user
    return user


async def checked_form(request: Request) -> None:
    """Refuse a form post that does not carry the session's CSRF token."""
    form = await request.form()
    sent = form.get("csrf")
    session = current_session(request)
    if session is None or not session.csrf_matches(sent if isinstance(sent, str) else None):
        raise BadForm(
            "this form is out of date or was not sent from cairn's own page; "
            "reload the page and send it again"
        )


PageUser = Annotated[User, Depends(signed_in)]
CheckedForm = Depends(checked_form)
