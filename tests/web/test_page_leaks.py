"""The leak property over the pages: secrets planted in what people type never come back out.

A request text, a rejection reason and a review message carrying generated secrets go in
through the pages' forms; no piece of one may be in any page or fragment that shows them, nor
in an error page. Pages are read with their HTML entities decoded, so an escaped secret is
still found. As in tests/api/test_leaks.py, the environment-value secret is left out.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from authority.conftest import WRITE_B
from cairn.jobs.policy import REASON_LIMIT
from security.leaks import Planted, assert_no_leak, planted_texts

from .conftest import Site
from .forms import Clients, text_of


def test_no_page_carries_a_planted_secret(site: Site, clients: Clients) -> None:
    site.pause_runner()
    site.team.set_policy(run_approval="admin")  # jobs wait at the run gate, where bob rejects
    alice, alice_csrf = clients.signed_in(site.tokens["alice"])
    bob, bob_csrf = clients.signed_in(site.tokens["bob"])

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(planted_texts(configured=False))
    def property_holds(planted: Planted) -> None:
        made = alice.post(
            "/new",
            data={"room": "sample", "text": planted.text, "script": WRITE_B, "csrf": alice_csrf},
        )
        assert made.status_code == 303, made.text
        job = made.headers["location"].rsplit("/", 1)[1]
        # A reason is required (the planted text may be empty) and bounded (it may be long).
        reason = _whole_lines(f"no: {planted.text}", REASON_LIMIT)
        rejected = bob.post(f"/jobs/{job}/reject", data={"reason": reason, "csrf": bob_csrf})
        assert rejected.status_code == 303, rejected.text
        shown = [
            text_of(page)
            for page in (
                bob.get(f"/jobs/{job}"),
                bob.get(f"/jobs/{job}/progress"),
                bob.get(f"/jobs/{job}/card"),
                alice.get("/rooms/1"),
                alice.get("/rooms/1/cards"),
                alice.get("/rooms"),
                alice.get("/new"),
                bob.get("/onboarding?group=1"),
                # Errors: a decision the job is past, and a request to no room.
                bob.post(f"/jobs/{job}/reject", data={"reason": planted.text, "csrf": bob_csrf}),
                bob.post(f"/jobs/{job}/reply", data={"message": planted.text, "csrf": bob_csrf}),
                alice.post("/new", data={"room": "nowhere", "text": planted.text,
                                         "csrf": alice_csrf}),
            )
        ]  # fmt: skip
        assert any("Rejected at review." in page or "rejected" in page for page in shown)
        kept = tuple(s for s in planted.secrets if s not in planted.environ.values())
        assert_no_leak(Planted(text=planted.text, secrets=kept), shown)

    property_holds()


def _whole_lines(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a line's end. A cut inside a planted secret
    would leave a piece that no longer reads as one (a key too short for its pattern, a token
    without its second dot) and that is shown as typed, as any text of the person's own is."""
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit + 1)
    return text[:end] if end > 0 else "no"
