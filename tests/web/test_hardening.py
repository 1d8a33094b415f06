"""The pages' hardening: sessions, CSRF on every form, the sign-in limit, errors as pages."""

from __future__ import annotations

from fastapi.testclient import TestClient

from authority.conftest import ASKS_FOR_RICH, WRITE_B
from cairn.api import create_app
from cairn.web.sessions import SIGN_IN_LIMIT

from .conftest import Site
from .forms import Clients, csrf_of, text_of


def test_every_form_needs_the_sessions_csrf_token(site: Site, clients: Clients) -> None:
    client, csrf = clients.signed_in(site.tokens["bob"])
    posts = [
        ("/new", {"room": "sample", "text": "x", "script": WRITE_B}),
        ("/jobs/1/approve", {}),
        ("/jobs/1/reject", {"reason": "no"}),
        ("/jobs/1/reply", {"message": "again"}),
        ("/onboarding/1/room", {"name": "r", "repository": "acme/app"}),
        ("/signout", {}),
    ]
    for path, data in posts:
        for sent in ({}, {"csrf": "forged"}):
            answer = client.post(path, data={**data, **sent})
            assert answer.status_code == 403, (path, answer.text)
            assert "reload the page and send it again" in text_of(answer)
    form = {"room": "sample", "text": "x", "script": WRITE_B, "csrf": csrf}
    made = client.post("/new", data=form)
    assert made.status_code == 303 and made.headers["location"].startswith("/jobs/")
    # Another session's token is no good either.
    other, _ = clients.signed_in(site.tokens["admin"])
    assert other.post("/signout", data={"csrf": csrf}).status_code == 403


def test_sign_in_is_limited_per_address_with_a_clear_answer(site: Site, clients: Clients) -> None:
    client = clients.new()
    csrf = csrf_of(client.get("/signin"))
    answers = [
        client.post("/signin", data={"token": "cairn_wrong", "csrf": csrf})
        for _ in range(SIGN_IN_LIMIT + 1)
    ]
    assert {a.status_code for a in answers[:SIGN_IN_LIMIT]} == {401}
    assert answers[-1].status_code == 429
    assert "wait a minute and try again" in text_of(answers[-1])
    right = client.post("/signin", data={"token": site.tokens["bob"], "csrf": csrf})
    assert right.status_code == 429, "even a right token waits out the limit"


def test_the_cookie_holds_a_session_id_never_the_token_and_is_secure_over_tls(
    site: Site, clients: Clients
) -> None:
    client, _ = clients.signed_in(site.tokens["alice"])
    [cookie] = list(client.cookies.jar)
    assert cookie.name == "cairn_session" and site.tokens["alice"] not in cookie.value
    assert not cookie.secure, "plain http on loopback"
    app = create_app(site.team.config, store=site.team.store)
    with TestClient(app, base_url="https://cairn.example") as tls:
        csrf = csrf_of(tls.get("/signin"))
        answer = tls.post(
            "/signin",
            data={"token": site.tokens["alice"], "csrf": csrf},
            follow_redirects=False,
        )
    header = answer.headers["set-cookie"]
    assert "Secure" in header and "HttpOnly" in header and "SameSite=lax" in header


def test_pages_decide_with_the_apis_authority_and_answer_errors_as_pages(
    site: Site, clients: Clients
) -> None:
    site.pause_runner()
    site.team.set_policy(run_approval="admin")  # the job waits at its run gate
    bob, bob_csrf = clients.signed_in(site.tokens["bob"])
    made = bob.post(
        "/new", data={"room": "sample", "text": "ask", "script": ASKS_FOR_RICH, "csrf": bob_csrf}
    )
    job = made.headers["location"].rsplit("/", 1)[1]
    alice, alice_csrf = clients.signed_in(site.tokens["alice"])
    seen = text_of(alice.get(f"/jobs/{job}"))
    assert "Run approval" in seen and "Waiting for an admin" in seen
    assert f'action="/jobs/{job}/approve"' not in seen, "a member is shown no gate buttons"
    refused = alice.post(f"/jobs/{job}/approve", data={"csrf": alice_csrf})
    assert refused.status_code == 403 and "only an admin" in text_of(refused)
    assert refused.headers["content-type"].startswith("text/html")
    own = bob.post(f"/jobs/{job}/approve", data={"csrf": bob_csrf})
    assert own.status_code == 403 and "cannot approve its run" in text_of(own)
    admin, admin_csrf = clients.signed_in(site.tokens["admin"])
    assert f'action="/jobs/{job}/approve"' in admin.get(f"/jobs/{job}").text
    approved = admin.post(f"/jobs/{job}/approve", data={"reason": "fine", "csrf": admin_csrf})
    assert approved.status_code == 303
    decided = text_of(admin.get(f"/jobs/{job}"))
    assert "run</strong> approved by admin" in decided and "fine" in decided
    carol, _ = clients.signed_in(site.tokens["carol"])
    hidden = carol.get(f"/jobs/{job}")
    assert hidden.status_code == 403 and "not a member of group default" in text_of(hidden)
    assert carol.get("/rooms/1").status_code == 403
    assert carol.get("/rooms/1/events").status_code == 403
    missing = bob.get("/jobs/424242")
    assert missing.status_code == 404 and "<h1>That did not work</h1>" in missing.text
    no_reason = admin.post(f"/jobs/{job}/reject", data={"reason": "  ", "csrf": admin_csrf})
    assert no_reason.status_code == 422 and "needs a reason" in text_of(no_reason)
    long = bob.post(f"/jobs/{job}/reject", data={"reason": "x" * 50_000, "csrf": bob_csrf})
    assert long.status_code == 422 and "form is not valid" in text_of(long)
    bad = bob.post("/new", data={"room": "no such room!", "text": "x", "csrf": bob_csrf})
    assert bad.status_code == 422 and "choose a room" in text_of(bad)
    anonymous = clients.new().get(f"/jobs/{job}")
    assert anonymous.status_code == 303 and anonymous.headers["location"] == "/signin"
    assert clients.new().get(f"/api/jobs/{job}").status_code == 401, "the API stays bearer-only"
    for answer in (refused, own, hidden, missing, no_reason, long, bad):
        assert "Traceback" not in answer.text and str(site.team.tmp) not in answer.text


def test_pages_and_scripts_come_only_from_cairn_itself(site: Site, clients: Clients) -> None:
    client, _ = clients.signed_in(site.tokens["bob"])
    page = client.get("/rooms/1")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "<script>" not in page.text and " on" + "click=" not in page.text
    for path in ("/static/cairn.js", "/static/vendor/htmx-2.0.11.min.js", "/static/cairn.css"):
        assert client.get(path).status_code == 200
