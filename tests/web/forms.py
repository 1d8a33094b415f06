"""A browser's part played by httpx: a cookie jar, and forms posted with their CSRF token."""

from __future__ import annotations

import html
import re

import httpx

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(page: httpx.Response) -> str:
    """The CSRF token a page's forms carry."""
    found = _CSRF.search(page.text)
    assert found, "the page has a form with a CSRF token"
    return html.unescape(found[1])


class Clients:
    """httpx clients of one test, each with its own cookie jar, closed after the test."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[httpx.Client] = []

    def new(self) -> httpx.Client:
        self.made.append(httpx.Client(base_url=self.url, timeout=30))
        return self.made[-1]

    def signed_in(self, token: str) -> tuple[httpx.Client, str]:
        """A client signed in with `token` through the form, and its session's CSRF token."""
        return sign_in(self.new(), token)

    def close(self) -> None:
        for client in self.made:
            client.close()


def sign_in(client: httpx.Client, token: str) -> tuple[httpx.Client, str]:
    """Sign `client` in with `token` through the form; it and its session's CSRF token."""
    form = client.get("/signin")
    answer = client.post("/signin", data={"token": token, "csrf": csrf_of(form)})
    assert answer.status_code == 303 and answer.headers["location"] == "/rooms", answer.text
    return client, csrf_of(client.get("/rooms"))


def text_of(page: httpx.Response) -> str:
    """A page as a person reads it: entities decoded, so an escaped secret is still found."""
    return html.unescape(page.text)
