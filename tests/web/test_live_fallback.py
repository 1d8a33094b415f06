"""When the progress stream fails the feed polls every 10 s, and uses the stream once it is back."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from playwright.sync_api import BrowserContext, expect

from authority.conftest import WRITE_B

from .conftest import Site
from .pages import WAIT_MS, body_data, sign_in

POLLED_MS = 45_000
"""Long enough for several 10-second polls on a loaded machine."""


def test_updates_arrive_by_polling_while_the_stream_fails_and_by_stream_after(
    site: Site, contexts: Callable[..., BrowserContext]
) -> None:
    page = contexts().new_page()
    sign_in(page, site, "bob")
    page.goto(f"{site.url}/rooms/1")
    body = page.locator("body")
    expect(body).to_have_attribute("data-live", "stream", timeout=WAIT_MS)
    assert body_data(page).get("polls") is None

    site.stream.failing.set()
    expect(body).to_have_attribute("data-live", "polling", timeout=WAIT_MS)
    expect(page.get_by_role("status")).to_contain_text("checking every 10 seconds")
    during = _submit(site, "made while the stream is down")
    card = page.locator(f"#job-{during}")
    expect(card).to_have_attribute("data-stage", "awaiting_review", timeout=POLLED_MS)
    assert int(body_data(page)["polls"]) >= 1
    assert site.stream.refused >= 1, "the page tried the stream again while it was down"

    site.stream.failing.clear()
    expect(body).to_have_attribute("data-live", "stream", timeout=POLLED_MS)
    assert body_data(page)["streamOpens"] == "2"
    polls = body_data(page)["polls"]
    after = _submit(site, "made once the stream is back")
    expect(page.locator(f"#job-{after}")).to_have_attribute(
        "data-stage", "awaiting_review", timeout=WAIT_MS
    )
    assert body_data(page)["polls"] == polls, "the update came by polling, not by the stream"
    assert int(body_data(page)["streamRefreshes"]) >= 1


def _submit(site: Site, text: str) -> int:
    """A scripted job submitted through the API as alice; the runner takes it to review."""
    made = httpx.post(
        f"{site.url}/api/jobs",
        json={"room": "sample", "request": text, "script": WRITE_B},
        headers={"Authorization": f"Bearer {site.tokens['alice']}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return int(made.json()["id"])
