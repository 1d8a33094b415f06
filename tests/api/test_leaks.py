"""The leak property over the API: secrets planted in what people send never come back out.

A request text and a rejection reason carrying generated secrets go in; no piece of one may
be in any answer that shows them (the list, the detail, the decision, an error). The
environment-value secret of `planted_texts` is left out: it names the server's environment,
which this test does not set.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from authority.conftest import WRITE_B
from security.leaks import Planted, assert_no_leak, planted_texts

from .conftest import Api


def test_no_answer_carries_a_planted_secret(api: Api) -> None:
    alice, bob = api.client("alice"), api.client("bob")
    script = api.script(WRITE_B)

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(planted_texts(configured=False))
    def property_holds(planted: Planted) -> None:
        made = alice.post(
            "/api/jobs", json={"room": "sample", "request": planted.text, "script": script}
        )
        assert made.status_code == 201, made.text
        job = made.json()["id"]
        rejected = bob.post(f"/api/jobs/{job}/reject", json={"reason": planted.text})
        shown = [
            made.json(),
            rejected.json(),
            alice.get(f"/api/jobs/{job}").json(),
            alice.get("/api/jobs", params={"room": "sample"}).json(),
            alice.post(f"/api/jobs/{job}/reply", json={"message": planted.text}).json(),
        ]
        kept = tuple(s for s in planted.secrets if s not in planted.environ.values())
        assert_no_leak(Planted(text=planted.text, secrets=kept), shown)

    property_holds()
