"""Steps the browser tests share: signing in, and reading what a page's script recorded."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from .conftest import Site

WAIT_MS = 60_000
"""How long a page may take to show what the runner did (a loaded machine is slow)."""
RELEASED = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - run: "until [ -e release.flag ]; do sleep 0.1; done; rm -f release.flag"
  - write: {path: hello.py, content: "def hello():\\n    return 'hi'\\n"}
  - finish: {summary: "a.txt and hello.py"}
"""
"""A job that asks for a dependency, then waits in running_agent until the test releases it."""


def sign_in(page: Page, site: Site, name: str) -> None:
    """Sign in through the form with `name`'s token; the rooms page follows."""
    page.goto(f"{site.url}/signin")
    page.get_by_label("Token").fill(site.tokens[name])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{site.url}/rooms")


def body_data(page: Page) -> dict[str, Any]:
    """The page body's data attributes (what cairn.js records of its live updates)."""
    found: dict[str, Any] = page.evaluate("() => Object.assign({}, document.body.dataset)")
    return found


def assert_accessible(page: Page) -> None:
    """Every control has a name a screen reader says, and the page has one main heading."""
    unnamed = page.evaluate(
        """() => Array.from(document.querySelectorAll(
            'input:not([type=hidden]), select, textarea, button, a[href]'))
          .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                        && !el.textContent.trim())
          .map(el => el.outerHTML.slice(0, 80))"""
    )
    assert unnamed == [], unnamed
    assert page.locator("h1").count() == 1
    assert page.locator("html").get_attribute("lang") == "en"
