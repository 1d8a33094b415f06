"""The fake forge's OAuth 2 authorization-code flow, for the web UI's repository onboarding.

    GET  /login/oauth/authorize?client_id=..&redirect_uri=..&state=..   a page: Authorize, Cancel
    GET  /login/oauth/authorize/decide?...&decision=authorize|cancel    back to redirect_uri
         with ?code=..&state=.. (authorized) or ?error=access_denied&state=.. (cancelled)
    POST /login/oauth/access_token  (client_id, client_secret, code[, redirect_uri]; form or
         JSON) -> {"access_token", "token_type", "scope"}: a token the forge then accepts

Codes are single-use and bound to the client and redirect URI they were issued for, as on
GitHub; a wrong client, secret, code or redirect URI is refused in GitHub's own error shape.
"""

from __future__ import annotations

import html
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

from cairn.testing.fake_forge_state import READ, WRITE, ForgeWorld, Token

AUTHORIZE = "/login/oauth/authorize"
DECIDE = "/login/oauth/authorize/decide"
ACCESS_TOKEN = "/login/oauth/access_token"


@dataclass(frozen=True)
class Page:
    """One answer of the flow: status, headers and body."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class _App:
    secret: str
    scopes: frozenset[str]
    user: str


class OAuthApps:
    """Registered OAuth apps and their outstanding codes; the caller holds the forge's lock."""

    def __init__(self, world: ForgeWorld) -> None:
        self._world = world
        self._apps: dict[str, _App] = {}
        self._codes: dict[str, tuple[str, str]] = {}  # code -> (client id, redirect uri)

    def register(
        self, scopes: Iterable[str] = (READ, WRITE), user: str = "oauth-user"
    ) -> tuple[str, str]:
        """A new app: (client id, client secret); tokens it obtains act as `user`."""
        client, secret = f"client_{secrets.token_hex(4)}", secrets.token_hex(12)
        self._apps[client] = _App(secret, frozenset(scopes), user)
        return client, secret

    def answer(self, method: str, path: str, query: dict[str, str], form: dict[str, str]) -> Page:
        """Route one request of the flow."""
        if path == AUTHORIZE and method == "GET":
            return self._page(query)
        if path == DECIDE and method == "GET":
            return self._decide(query)
        if path == ACCESS_TOKEN and method == "POST":
            return self._exchange(form)
        return _json(404, {"error": "not_found"})

    def _checked(self, query: dict[str, str]) -> Page | None:
        """A refusal of an authorization request, or None when it may go on."""
        if query.get("client_id", "") not in self._apps:
            return _html(400, "<p>The application asking for access is not registered.</p>")
        where = urlsplit(query.get("redirect_uri", ""))
        if where.scheme not in ("http", "https") or not where.netloc:
            return _html(400, "<p>The redirect_uri is missing or not an http(s) address.</p>")
        return None

    def _page(self, query: dict[str, str]) -> Page:
        refused = self._checked(query)
        if refused is not None:
            return refused
        keep = {k: query.get(k, "") for k in ("client_id", "redirect_uri", "state")}
        authorize = html.escape(f"{DECIDE}?{urlencode(keep | {'decision': 'authorize'})}")
        cancel = html.escape(f"{DECIDE}?{urlencode(keep | {'decision': 'cancel'})}")
        client = html.escape(keep["client_id"])
        return _html(
            200,
            f"<h1>Authorize {client}</h1><p>It asks to read and write your repositories.</p>"
            f'<a id="authorize" href="{authorize}">Authorize</a> '
            f'<a id="cancel" href="{cancel}">Cancel</a>',
        )

    def _decide(self, query: dict[str, str]) -> Page:
        refused = self._checked(query)
        if refused is not None:
            return refused
        back, state = query["redirect_uri"], query.get("state", "")
        if query.get("decision") != "authorize":
            return _redirect(back, {"error": "access_denied", "state": state})
        code = secrets.token_hex(10)
        self._codes[code] = (query["client_id"], back)
        return _redirect(back, {"code": code, "state": state})

    def _exchange(self, form: dict[str, str]) -> Page:
        client, code = form.get("client_id", ""), form.get("code", "")
        app = self._apps.get(client)
        if app is None or not secrets.compare_digest(app.secret, form.get("client_secret", "")):
            return _json(401, {"error": "incorrect_client_credentials"})
        issued = self._codes.pop(code, None)
        redirect = form.get("redirect_uri")
        if issued is None or issued[0] != client or redirect not in (None, issued[1]):
            return _json(400, {"error": "bad_verification_code"})
        token = f"fake_oauth_{secrets.token_hex(12)}"
        self._world.tokens[token] = Token(app.user, app.scopes)
        return _json(200, {"access_token": token, "token_type": "bearer", "scope": "repo"})


def read_form(raw: bytes, content_type: str) -> dict[str, str]:
    """A token request's fields, sent as a form or as JSON."""
    if not raw:
        return {}
    if content_type.startswith("application/json"):
        try:
            data = json.loads(raw)
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return dict(parse_qsl(raw.decode("utf-8", "replace")))


def _redirect(back: str, params: dict[str, str]) -> Page:
    joiner = "&" if urlsplit(back).query else "?"
    return Page(302, {"Location": f"{back}{joiner}{urlencode(params)}"}, b"")


def _html(status: int, body: str) -> Page:
    page = f"<!doctype html><html><body>{body}</body></html>".encode()
    return Page(status, {"Content-Type": "text/html; charset=utf-8"}, page)


def _json(status: int, answer: object) -> Page:
    return Page(status, {"Content-Type": "application/json"}, json.dumps(answer).encode())
