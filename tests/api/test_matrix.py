"""Every endpoint as anonymous, a member, an admin of another group and an admin: the status.

`member` is alice and `admin` is bob (group default, which owns room sample); `outsider` is
carol, admin of group others only. Jobs are requested by admin `admin`, so no caller decides
their own. Each call gets a job of its own at the point the endpoint acts on.
"""

from __future__ import annotations

import pytest

from authority.conftest import WRITE_B

from .conftest import Api

CALLERS = {"anonymous": None, "member": "alice", "outsider": "carol", "admin": "bob"}
# endpoint: (method, path, body, the job it needs, {caller: status})
MATRIX: dict[str, tuple[str, str, dict[str, object] | None, str | None, dict[str, int]]] = {
    "health": (
        "GET",
        "/api/health",
        None,
        None,
        dict(anonymous=200, member=200, outsider=200, admin=200),
    ),
    "list jobs": (
        "GET",
        "/api/jobs",
        None,
        None,
        dict(anonymous=401, member=200, outsider=200, admin=200),
    ),
    "show job": (
        "GET",
        "/api/jobs/{job}",
        None,
        "run",
        dict(anonymous=401, member=200, outsider=403, admin=200),
    ),
    "submit": (
        "POST",
        "/api/jobs",
        "submit",
        None,
        dict(anonymous=401, member=201, outsider=403, admin=201),
    ),
    "approve": (
        "POST",
        "/api/jobs/{job}/approve",
        None,
        "run",
        dict(anonymous=401, member=403, outsider=403, admin=200),
    ),
    "reject": (
        "POST",
        "/api/jobs/{job}/reject",
        {"reason": "no"},
        "run",
        dict(anonymous=401, member=403, outsider=403, admin=200),
    ),
    "reply": (
        "POST",
        "/api/jobs/{job}/reply",
        {"message": "more"},
        "review",
        dict(anonymous=401, member=403, outsider=403, admin=200),
    ),
    "cancel": (
        "POST",
        "/api/jobs/{job}/cancel",
        None,
        "run",
        dict(anonymous=401, member=403, outsider=403, admin=200),
    ),
    "retry": (
        "POST",
        "/api/jobs/{job}/retry",
        None,
        "ended",
        dict(anonymous=401, member=201, outsider=403, admin=201),
    ),
    "rooms": (
        "GET",
        "/api/rooms",
        None,
        None,
        dict(anonymous=401, member=200, outsider=200, admin=200),
    ),
    "groups": (
        "GET",
        "/api/groups",
        None,
        None,
        dict(anonymous=401, member=200, outsider=200, admin=200),
    ),
    "job events": (
        "GET",
        "/api/jobs/{job}/events",
        None,
        "run",
        dict(anonymous=401, member=200, outsider=403, admin=200),
    ),
    "room events": (
        "GET",
        "/api/rooms/1/events",
        None,
        None,
        dict(anonymous=401, member=200, outsider=403, admin=200),
    ),
}


def _job(api: Api, where: str) -> int:
    team = api.team
    job = team.submit(WRITE_B, actor="admin")
    if where == "review":
        team.approve(job.id, actor="bob")
        team.work(job.id)
        assert team.job(job.id).stage.value == "awaiting_review"
    elif where == "ended":
        team.reject(job.id, "not now", actor="bob")
    return job.id


@pytest.mark.parametrize("endpoint", MATRIX)
def test_each_caller_gets_the_status_of_the_matrix(api: Api, endpoint: str) -> None:
    method, path, body, needs, expected = MATRIX[endpoint]
    assert set(expected) == set(CALLERS)
    for caller, name in CALLERS.items():
        url = path.format(job=_job(api, needs)) if needs else path
        payload = (
            {"room": "sample", "request": "r", "script": api.script(WRITE_B)}
            if body == "submit"
            else body
        )
        status = _call(api, name, method, url, payload)
        assert status == expected[caller], f"{endpoint} as {caller}"


def _call(api: Api, name: str | None, method: str, url: str, body: object) -> int:
    client = api.client(name)
    if url.endswith("/events"):
        with client.stream(method, url) as stream:
            return stream.status_code
    return client.request(method, url, json=body).status_code


def test_an_outsider_sees_none_of_another_groups_work(api: Api) -> None:
    _job(api, "run")
    carol = api.client("carol")
    assert carol.get("/api/jobs").json() == []
    assert carol.get("/api/rooms").json() == []
    assert [g["name"] for g in carol.get("/api/groups").json()] == ["others"]
    assert carol.get("/api/jobs", params={"room": "sample"}).status_code == 403
    alice = api.client("alice")
    assert [r["name"] for r in alice.get("/api/rooms").json()] == ["sample"]
    assert len(alice.get("/api/jobs").json()) == 1


def test_an_outsider_learns_nothing_of_where_a_job_stands(api: Api) -> None:
    carol = api.client("carol")
    for where in ("run", "ended"):
        job = _job(api, where)
        for action, body in (("approve", None), ("reply", {"message": "m"}), ("cancel", None)):
            refused = carol.post(f"/api/jobs/{job}/{action}", json=body)
            assert refused.status_code == 403 and "not a member" in refused.json()["error"]
