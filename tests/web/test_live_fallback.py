"""When the progress stream fails the feed and the job page poll every 10 s, and use the stream
once it is back."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from playwright.sync_api import BrowserContext, expect

from authority.conftest import WRITE_B

from .conftest import Site
from .pages import RELEASED, WAIT_MS, body_data, sign_in

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


def test_the_job_page_polls_while_its_stream_fails_and_uses_the_stream_after(
    site: Site, contexts: Callable[..., BrowserContext]
) -> None:
    job_id = _submit(site, "waits for its dependency", RELEASED)
    page = contexts().new_page()
    sign_in(page, site, "bob")
    page.goto(f"{site.url}/jobs/{job_id}")
    body = page.locator("body")
    stage = page.locator("#job-stage")
    expect(stage).to_have_attribute("data-stage", "awaiting_dependency_approval", timeout=WAIT_MS)
    expect(body).to_have_attribute("data-live", "stream", timeout=WAIT_MS)
    assert body_data(page).get("polls") is None

    site.stream.failing.set()
    expect(body).to_have_attribute("data-live", "polling", timeout=WAIT_MS)
    expect(page.locator("#live-state")).to_contain_text("checking every 10 seconds")
    refused = site.stream.refused
    _decide(site, job_id)  # the dependency, approved elsewhere while the stream is down
    expect(stage).to_have_attribute("data-stage", "running_agent", timeout=POLLED_MS)
    assert int(body_data(page)["polls"]) >= 1
    expect(page.locator(".gate")).to_have_count(0)
    assert site.stream.refused > refused, "the page tried the stream again while it was down"

    site.stream.failing.clear()
    expect(body).to_have_attribute("data-live", "stream", timeout=POLLED_MS)
    assert body_data(page)["streamOpens"] == "2"
    polls = body_data(page)["polls"]
    site.release(job_id)
    expect(stage).to_have_attribute("data-stage", "awaiting_review", timeout=WAIT_MS)
    assert body_data(page)["polls"] == polls, "the update came by polling, not by the stream"
    assert int(body_data(page)["streamRefreshes"]) >= 1


def _decide(site: Site, job_id: int) -> None:
    """Bob, an admin of the room's group, approves the gate the job waits at, through the API."""
    answer = httpx.post(
        f"{site.url}/api/jobs/{job_id}/approve",
        json={},
        headers={"Authorization": f"Bearer {site.tokens['bob']}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def _submit(site: Site, text: str, script: str = WRITE_B) -> int:
    """A scripted job submitted through the API as alice; the runner takes it on."""
    made = httpx.post(
        f"{site.url}/api/jobs",
        json={"room": "sample", "request": text, "script": script},
        headers={"Authorization": f"Bearer {site.tokens['alice']}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return int(made.json()["id"])
