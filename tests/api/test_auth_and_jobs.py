"""Tokens, a job's way through the API, its detail against `cairn show --json`, authority."""

from __future__ import annotations

import json
import logging

import pytest

from authority.conftest import ASKS_FOR_RICH, WRITE_B
from cairn.cli import main

from .conftest import Api


def test_health_needs_no_token_and_everything_else_does(api: Api) -> None:
    assert api.client(None).get("/api/health").json() == {"status": "ok"}
    for client in (api.client(None), _bearer(api, "cairn_not-a-real-token")):
        answer = client.get("/api/jobs")
        assert answer.status_code == 401
        assert answer.json()["error"].startswith("a valid API token is required")
        assert "cairn_not-a-real-token" not in answer.text
    assert api.client("alice").get("/api/jobs").status_code == 200


def test_a_token_is_never_in_an_answer_or_a_log_line(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alice = api.client("alice")
    job = alice.post("/api/jobs", json=_submit(api, WRITE_B)).json()
    answers = [
        alice.get("/api/jobs"),
        alice.get(f"/api/jobs/{job['id']}"),
        alice.post(f"/api/jobs/{job['id']}/approve"),
        alice.get("/api/rooms"),
        alice.get("/api/groups"),
        _bearer(api, api.tokens["alice"] + "x").get("/api/jobs"),
    ]
    for token in api.tokens.values():
        for answer in answers:
            assert token not in answer.text and token not in str(answer.headers)
        assert not [r for r in caplog.records if token in r.getMessage()]


def test_a_job_submitted_through_the_api_runs_and_its_detail_is_cairn_shows(
    api: Api, store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, bob = api.client("alice"), api.client("bob")
    made = alice.post("/api/jobs", json=_submit(api, WRITE_B, "Add b.txt"))
    assert made.status_code == 201, made.text
    job = made.json()
    assert (job["stage"], job["status"]) == ("awaiting_run_approval", "waiting")
    assert bob.post(f"/api/jobs/{job['id']}/approve").json()["status"] == "queued"
    api.team.work()
    detail = alice.get(f"/api/jobs/{job['id']}").json()
    assert (detail["stage"], detail["status"]) == ("awaiting_review", "waiting")
    assert detail["request"] == "Add b.txt" and detail["requester"] == "alice"
    monkeypatch.setenv("CAIRN_DATABASE_URL", store_url)
    capsys.readouterr()
    main(["--home", str(api.team.config.home), "show", str(job["id"]), "--json"])
    assert detail == json.loads(capsys.readouterr().out)
    listed = alice.get("/api/jobs", params={"room": "sample", "status": "waiting"}).json()
    assert [j["id"] for j in listed] == [job["id"]]
    assert alice.get("/api/jobs", params={"status": "completed"}).json() == []


def test_run_approval_has_the_clis_authority(api: Api) -> None:
    admin = api.client("admin")
    job = admin.post("/api/jobs", json=_submit(api, WRITE_B)).json()
    own = admin.post(f"/api/jobs/{job['id']}/approve")
    assert own.status_code == 403 and "cannot approve its run" in own.json()["error"]
    member = api.client("alice").post(f"/api/jobs/{job['id']}/approve")
    assert member.status_code == 403 and "only an admin" in member.json()["error"]
    outsider = api.client("carol").post(f"/api/jobs/{job['id']}/approve")
    assert outsider.status_code == 403 and "not a member" in outsider.json()["error"]
    assert api.client("bob").post(f"/api/jobs/{job['id']}/approve").status_code == 200


def test_dependency_and_review_gates_reject_with_a_reason_and_reply(api: Api) -> None:
    alice, bob = api.client("alice"), api.client("bob")
    job = alice.post("/api/jobs", json=_submit(api, ASKS_FOR_RICH)).json()["id"]
    bob.post(f"/api/jobs/{job}/approve")
    api.team.work()
    detail = alice.get(f"/api/jobs/{job}").json()
    assert detail["stage"] == "awaiting_dependency_approval"
    assert [d["name"] for d in detail["dependency_requests"]] == ["termcolor"]
    no_reason = bob.post(f"/api/jobs/{job}/reject", json={})
    assert no_reason.status_code == 422 and "reason" in no_reason.json()["error"]
    assert bob.post(f"/api/jobs/{job}/reject", json={"reason": "no colour"}).status_code == 200
    api.team.work()
    assert alice.get(f"/api/jobs/{job}").json()["stage"] == "awaiting_review"
    asked = bob.post(f"/api/jobs/{job}/reply", json={"message": "name it c.txt", "fresh": False})
    assert asked.json() == {"id": job, "stage": "running_agent", "status": "queued"}
    decisions = alice.get(f"/api/jobs/{job}").json()["decisions"]
    assert decisions[-1]["verdict"] == "changes_requested"
    assert decisions[-1]["reason"] == "name it c.txt"


def test_cancel_retry_and_conflicts(api: Api) -> None:
    alice = api.client("alice")
    job = alice.post("/api/jobs", json=_submit(api, WRITE_B)).json()["id"]
    early = alice.post(f"/api/jobs/{job}/retry")
    assert early.status_code == 409 and early.json()["next"] == [{"action": "cancel", "job": job}]
    assert alice.post(f"/api/jobs/{job}/cancel").json()["status"] == "cancelled"
    again = alice.post(f"/api/jobs/{job}/retry")
    assert again.status_code == 201 and again.json()["id"] != job
    assert alice.post(f"/api/jobs/{job}/cancel").status_code == 409
    assert alice.get("/api/jobs/999999").status_code == 404


def test_a_remote_client_can_never_make_the_server_read_one_of_its_files(api: Api) -> None:
    alice = api.client("alice")
    server_file = api.team.tmp / "server-only.yaml"
    server_file.write_text(WRITE_B)
    refused = alice.post(
        "/api/jobs", json={"room": "sample", "request": "x", "agent": f"script:{server_file}"}
    )
    assert refused.status_code == 422 and "script:PATH" in refused.json()["error"]
    assert str(api.team.tmp) not in refused.text
    both = alice.post("/api/jobs", json={**_submit(api, WRITE_B), "agent": "openai:m"})
    assert both.status_code == 422 and "not both" in both.json()["error"]
    assert alice.post("/api/jobs", json=_submit(api, WRITE_B)).status_code == 201


def test_bad_input_is_a_clear_422_that_does_not_echo_it(api: Api) -> None:
    alice = api.client("alice")
    secret = "ghp_" + "a" * 36
    answer = alice.post("/api/jobs", json={"room": "sample", "request": "x", "agent": secret})
    assert answer.status_code == 422 and secret not in answer.text
    extra = alice.post("/api/jobs", json={**_submit(api, WRITE_B), "as": "bob"})
    assert extra.status_code == 422 and "as" in extra.json()["error"]
    # A NUL byte, which PostgreSQL refuses in text, is bad input, never a server error.
    nul = alice.post("/api/jobs", json={**_submit(api, WRITE_B), "room": "sam\x00ple"})
    assert nul.status_code == 422
    assert alice.get("/api/jobs", params={"room": "a\x00"}).status_code == 422
    in_text = alice.post("/api/jobs", json=_submit(api, WRITE_B, "add\x00 b"))
    assert (
        in_text.status_code == 201
        and "\x00" not in alice.get(f"/api/jobs/{in_text.json()['id']}").json()["request"]
    )
    big = alice.post("/api/jobs", content=b"{" + b" " * 300_000 + b"}")
    assert big.status_code == 413
    assert alice.get("/api/jobs").headers["x-content-type-options"] == "nosniff"


def _submit(api: Api, steps: str, text: str = "Change something") -> dict[str, str]:
    return {"room": "sample", "request": text, "script": api.script(steps)}


def _bearer(api: Api, token: str):  # type: ignore[no-untyped-def]
    client = api.client(None)
    client.headers["Authorization"] = f"Bearer {token}"
    return client
