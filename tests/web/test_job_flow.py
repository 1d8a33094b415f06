"""A job's way through the pages: sign in, submit, approve its dependency, watch it, reject it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import BrowserContext, Page, expect

from .conftest import Site
from .pages import RELEASED, WAIT_MS, assert_accessible, sign_in

Contexts = Callable[..., BrowserContext]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def test_sign_in_refuses_a_wrong_token_and_says_what_to_do(site: Site, contexts: Contexts) -> None:
    page = contexts().new_page()
    page.goto(f"{site.url}/rooms")
    expect(page).to_have_url(f"{site.url}/signin")
    page.get_by_label("Token").fill("cairn_not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("paste the token")
    assert "cairn_not-a-token" not in page.content()
    # By keyboard alone: the token field, then Enter.
    page.get_by_label("Token").fill(site.tokens["alice"])
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{site.url}/rooms")
    expect(page.get_by_role("link", name="sample")).to_be_visible()
    assert_accessible(page)
    cookie = next(c for c in page.context.cookies() if c["name"] == "cairn_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert site.tokens["alice"] not in cookie["value"]
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{site.url}/signin")
    page.goto(f"{site.url}/rooms")
    expect(page).to_have_url(f"{site.url}/signin")


def test_a_dependency_approved_in_the_page_moves_the_card_live_then_the_admin_rejects(
    site: Site, contexts: Contexts, artifacts: Path
) -> None:
    context = contexts(viewport=DESKTOP)
    page = context.new_page()
    sign_in(page, site, "bob")
    job_id = _submit(page, site, "Add a greeting", RELEASED)

    feed = context.new_page()
    feed.goto(f"{site.url}/rooms/1")
    card = feed.locator(f"#job-{job_id}")
    expect(card).to_have_attribute("data-stage", "awaiting_dependency_approval", timeout=WAIT_MS)
    expect(card).to_contain_text("Add a greeting")
    expect(feed.locator("body")).to_have_attribute("data-live", "stream", timeout=WAIT_MS)
    feed.evaluate("() => { window.notReloaded = true; }")

    page.goto(f"{site.url}/jobs/{job_id}")
    gate = page.locator(".gate")
    expect(gate).to_contain_text("termcolor 2.4.0")
    gate.get_by_role("button", name="Approve").click()
    expect(card).to_have_attribute("data-stage", "running_agent", timeout=WAIT_MS)
    # Until the job ends its card shows the request and the stage only (rule 2).
    expect(card.locator(".outcome")).to_have_count(0)
    site.release(job_id)
    expect(card).to_have_attribute("data-stage", "awaiting_review", timeout=WAIT_MS)
    assert feed.evaluate("() => window.notReloaded === true"), "the feed page was reloaded"
    _screenshots(feed, artifacts, "feed")
    assert_accessible(feed)

    page.goto(f"{site.url}/jobs/{job_id}")
    diff = page.locator(".diff-section")
    # The approved dependency is part of the change, in the project's declarations and lock.
    paths = ["a.txt", "hello.py", "pyproject.toml", "uv.lock"]
    expect(diff.locator(".file-path")).to_have_text(paths)
    expect(diff.locator("tr.add", has_text="termcolor")).not_to_have_count(0)
    added = diff.locator("tr.add", has_text="return 'hi'")
    expect(added).to_have_count(1)
    # Highlighted by Pygments: `def` is a keyword, `'hi'` a string.
    expect(diff.locator("tr.add .src .k", has_text="def")).to_have_count(1)
    expect(diff.locator("tr.add .src .s1", has_text="'hi'")).to_have_count(1)
    expect(page.locator(".timeline li").first).to_contain_text("queued")
    # A script agent keeps no model conversation, so its turn lists no tool calls.
    tools = page.get_by_role("region", name="The agent's tool calls")
    expect(tools).to_contain_text("No tool calls recorded.")
    expect(tools).to_contain_text("2 agent run(s)")  # before and after the dependency
    _screenshots(page, artifacts, "job-detail")
    assert_accessible(page)

    gate = page.locator(".gate")
    expect(gate).to_contain_text("Integration gate")
    gate.get_by_label("Reason (required)").fill("Greetings belong in the docs, not the code")
    gate.get_by_role("button", name="Reject").click()
    expect(page.locator("#job-stage")).to_have_attribute("data-status", "rejected")
    decision = page.locator(".decisions li", has_text="integration rejected by bob")
    expect(decision.locator(".reason")).to_have_text("Greetings belong in the docs, not the code")
    expect(card).to_have_attribute("data-status", "rejected", timeout=WAIT_MS)
    expect(card.locator(".outcome")).to_contain_text("Rejected at review.")


def test_line_comments_go_back_to_the_agent_as_one_review(site: Site, contexts: Contexts) -> None:
    page = contexts().new_page()
    sign_in(page, site, "bob")
    script = (
        'steps:\n  - write: {path: notes.md, content: "one\\ntwo\\n"}\n'
        "  - finish: {summary: notes}\n"
    )
    site.pause_runner()
    job_id = _submit(page, site, "Write notes", script)
    # The job page follows the job too (htmx's SSE extension re-fetches its progress part).
    page.evaluate("() => { window.notReloaded = true; }")
    expect(page.locator("#job-stage")).to_have_attribute("data-status", "queued")
    site.resume_runner()
    expect(page.locator("#job-stage")).to_have_attribute(
        "data-stage", "awaiting_review", timeout=WAIT_MS
    )
    assert page.evaluate("() => window.notReloaded === true"), "the job page was reloaded"
    page.goto(f"{site.url}/new")
    assert_accessible(page)
    page.goto(f"{site.url}/jobs/{job_id}")
    page.get_by_role("button", name="Comment on notes.md line 2").click()
    page.get_by_label("Line 2 of notes.md").fill("say three instead")
    page.get_by_role("button", name="Comment on notes.md line 1").click()
    page.get_by_label("Line 1 of notes.md").fill("capitalize this")
    page.get_by_label("Message").fill("and add a title")
    page.get_by_role("button", name="Send the review").click()
    asked = page.locator(".decisions li", has_text="changes_requested by bob").last
    expect(asked.locator(".reason")).to_have_text(
        "Comments on the diff:\n- notes.md line 2: say three instead\n"
        "- notes.md line 1: capitalize this\n\nand add a title"
    )
    detail = site.team.detail(job_id)
    assert [d["verdict"] for d in detail["decisions"]].count("changes_requested") == 1


def _submit(page: Page, site: Site, text: str, script: str) -> int:
    """Submit a scripted request through the new-request form; the job's id."""
    page.goto(f"{site.url}/new")
    page.get_by_label("Room", exact=True).select_option("sample")
    page.get_by_label("What should the agent do?").fill(text)
    page.get_by_text("Scripted agent (for tests and demos)").click()
    page.get_by_label("Script agent YAML").fill(script)
    page.get_by_role("button", name="Submit the request").click()
    page.wait_for_url(f"{site.url}/jobs/*")
    return int(page.url.rsplit("/", 1)[1])


def _screenshots(page: Page, artifacts: Path, name: str) -> None:
    """The page at desktop and at phone width, saved as test artifacts."""
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.screenshot(path=str(artifacts / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)
