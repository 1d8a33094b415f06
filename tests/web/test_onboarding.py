"""Repository onboarding: the forge's window closed or refused never leaves the page stuck,
and the resume marker (group id and stage times only) brings the person back to the stage."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa
from playwright.sync_api import BrowserContext, Page, expect

from cairn.store import credentials
from cairn.store.schema import credentials as credential_rows

from .conftest import Site
from .pages import WAIT_MS, assert_accessible, sign_in

STAGES = {"group", "authorize", "repository", "check"}


def test_closing_or_denying_the_forge_window_offers_a_retry_and_the_marker_resumes(
    site: Site, contexts: Callable[..., BrowserContext]
) -> None:
    page = contexts().new_page()
    sign_in(page, site, "bob")
    page.goto(f"{site.url}/onboarding")
    page.get_by_label("Group").select_option("default")
    page.get_by_role("button", name="Choose").click()
    oauth = page.locator("#oauth")
    expect(oauth).to_have_attribute("data-state", "idle")

    with page.expect_popup() as opened:
        page.get_by_role("button", name="Authorize at the forge").click()
    forge = opened.value
    expect(forge.locator("#authorize")).to_be_visible()
    expect(oauth).to_have_attribute("data-state", "connecting")
    forge.close()
    expect(oauth).to_have_attribute("data-state", "closed", timeout=WAIT_MS)
    expect(page.get_by_role("status").last).to_contain_text("window was closed")

    with page.expect_popup() as opened:
        page.get_by_role("button", name="Try again").click()
    opened.value.locator("#cancel").click()
    expect(oauth).to_have_attribute("data-state", "closed", timeout=WAIT_MS)
    assert _stored(site) == []

    with page.expect_popup() as opened:
        page.get_by_role("button", name="Try again").click()
    opened.value.locator("#authorize").click()
    expect(page.locator("#authorized")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#step-repository")).to_have_class("step current")
    expect(page.locator("body")).to_have_attribute("data-marked", "repository")
    [token] = [t for t in site.forge.world.tokens if t.startswith("fake_oauth_")]
    assert _stored(site) == ["oauth-default"]
    _assert_encrypted(site, token)

    page.goto(f"{site.url}/rooms")
    page.goto(f"{site.url}/onboarding")
    resume = page.locator("#resume")
    expect(resume).to_be_visible()
    expect(resume).to_contain_text("choose the repository")
    _assert_only_the_marker(page, token, {"group", "authorize", "repository"})
    # The marker only says where to offer to go on; the page shows what the server finds.
    page.evaluate(
        """() => { const m = JSON.parse(localStorage.getItem("cairn.onboarding"));
        m.stages.check = new Date().toISOString();
        localStorage.setItem("cairn.onboarding", JSON.stringify(m)); }"""
    )
    page.reload()
    expect(resume).to_contain_text("the runner check")
    page.get_by_role("link", name="Continue").click()
    expect(page.locator("#step-repository")).to_have_class("step current")
    expect(page.locator("#step-check")).to_have_count(0)
    expect(page.locator("body")).to_have_attribute("data-marked", "repository")
    _assert_only_the_marker(page, token, {"group", "authorize", "repository"})

    assert_accessible(page)
    page.get_by_label("New room's name").fill("app")
    page.get_by_label("Repository (owner/name)").fill("acme/missing")
    page.get_by_role("button", name="Connect the room").click()
    expect(page.get_by_role("alert")).to_contain_text("acme/missing")
    assert "Traceback" not in page.content()
    page.goto(f"{site.url}/onboarding?group=1")
    page.get_by_label("New room's name").fill("app")
    page.get_by_label("Repository (owner/name)").fill("acme/app")
    page.get_by_role("button", name="Connect the room").click()
    check = page.locator("#step-check")
    expect(check).to_have_class("step current", timeout=WAIT_MS)
    expect(check).to_contain_text("Room app: ready")
    expect(check.locator("li.ok")).to_have_count(4)
    expect(page.locator("body")).to_have_attribute("data-marked", "check")
    _assert_only_the_marker(page, token, STAGES)


def _stored(site: Site) -> list[str]:
    with site.team.store.begin() as conn:
        return credentials.credential_names(conn)


def _assert_encrypted(site: Site, token: str) -> None:
    with site.team.store.begin() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.select(credential_rows))]
    assert rows and token not in repr(rows), "the forge token is stored only encrypted"


def _assert_only_the_marker(page: Page, token: str, stages: set[str]) -> None:
    """localStorage holds one key: the group id and stage times, and nothing else at all."""
    stored = page.evaluate("() => Object.assign({}, localStorage)")
    assert list(stored) == ["cairn.onboarding"]
    marker = json.loads(stored["cairn.onboarding"])
    assert set(marker) == {"group", "stages"}
    assert marker["group"] == 1
    assert set(marker["stages"]) == stages
    for when in marker["stages"].values():
        datetime.fromisoformat(when.replace("Z", "+00:00"))
    everything = json.dumps(stored) + page.evaluate("() => JSON.stringify(sessionStorage)")
    assert token not in everything and "acme" not in everything
    assert page.evaluate("() => document.cookie") == "", "the session cookie is HttpOnly"
