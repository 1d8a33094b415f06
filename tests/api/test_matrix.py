"""Every endpoint as anonymous, a member, an admin of another group and an admin: the status.

`member` is alice and `admin` is bob (group default, which owns room sample); `outsider` is
carol, admin of group others only. Jobs and schedules are requested by admin `admin`, so no
caller decides their own. Each call gets what it acts on (a job at the right point, an agent,
a schedule) made for it alone. The rows are checked against the app's own routes: an
endpoint added without a row here fails `test_every_endpoint_has_a_row`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from authority.conftest import WRITE_B
from cairn.api import create_app
from cairn.stages import Stage, Status
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger

from .conftest import SECRET_KEY, Api

CALLERS = {"anonymous": None, "member": "alice", "outsider": "carol", "admin": "bob"}
Setup = Callable[[Api, str], dict[str, object]]


@dataclass(frozen=True)
class Row:
    method: str
    route: str
    """The route as the app declares it: what ties the row to the endpoint."""
    expected: dict[str, int]
    setup: Setup | None = None
    """Makes what one call acts on; returns the path's fields (and `caller`)."""
    body: dict[str, object] | None = None
    fields: dict[str, object] = field(default_factory=dict)


def statuses(anonymous: int, member: int, outsider: int, admin: int) -> dict[str, int]:
    return dict(anonymous=anonymous, member=member, outsider=outsider, admin=admin)


def _job(api: Api, where: str) -> int:
    team = api.team
    job = team.submit(WRITE_B, actor="admin")
    if where == "review":
        team.approve(job.id, actor="bob")
        team.work(job.id)
        assert team.job(job.id).stage.value == "awaiting_review"
    elif where == "ended":
        team.reject(job.id, "not now", actor="bob")
    elif where in ("blocked", "dependency"):
        with team.store.begin() as conn:
            found = job_ledger.get_job(conn, job.id)
            if where == "blocked":
                job_ledger.transition(
                    conn, found, found.stage, Status.blocked, diagnosis="the base branch moved"
                )
            else:
                dep_ledger.add(
                    conn, job.id, ecosystem="pypi", name="rich", version="1.0", reason="r"
                )
                job_ledger.transition(
                    conn, found, Stage.awaiting_dependency_approval, Status.waiting
                )
    return job.id


def at(where: str) -> Setup:
    def setup(api: Api, caller: str) -> dict[str, object]:
        job = _job(api, where)
        if where != "dependency":
            return {"job_id": job}
        with api.team.store.begin() as conn:
            return {"job_id": job, "request_id": dep_ledger.latest(conn, job).id}

    return setup


def an_agent(api: Api, caller: str) -> dict[str, object]:
    from cairn.jobs.named_agents import add_named_agent

    with api.team.store.begin() as conn:
        add_named_agent(conn, f"gone-{caller}", "openai", {"model": "m"}, "admin")
    return {"name": f"gone-{caller}"}


def a_schedule(api: Api, caller: str) -> dict[str, object]:
    from cairn.jobs.schedules import add_schedule
    from cairn.sanitize import Sanitizer

    with api.team.store.begin() as conn:
        add_schedule(
            conn,
            name=f"nightly-{caller}",
            room="sample",
            cron="0 3 * * *",
            request="tidy up",
            agent={"adapter": "script", "script": {"steps": [{"finish": {"summary": "s"}}]}},
            actor="admin",
            sanitizer=Sanitizer(),
        )
    return {"name": f"nightly-{caller}"}


def a_credential(api: Api, caller: str) -> dict[str, object]:
    from cairn.store.credentials import CredentialCipher, set_credential

    with api.team.store.begin() as conn:
        set_credential(conn, f"bot-{caller}", "forge-token", CredentialCipher(SECRET_KEY))
    return {"name": f"bot-{caller}"}


SUBMIT = {"room": "sample", "request": "r", "script": WRITE_B}
SCHEDULE = {"room": "sample", "request": "r", "cron": "0 3 * * *", "script": WRITE_B}
MATRIX: dict[str, Row] = {
    "health": Row("GET", "/api/health", statuses(200, 200, 200, 200)),
    "list jobs": Row("GET", "/api/jobs", statuses(401, 200, 200, 200)),
    "show job": Row("GET", "/api/jobs/{job_id}", statuses(401, 200, 403, 200), at("run")),
    "submit": Row("POST", "/api/jobs", statuses(401, 201, 403, 201), body=SUBMIT),
    "approve": Row("POST", "/api/jobs/{job_id}/approve", statuses(401, 403, 403, 200), at("run")),
    "reject": Row(
        "POST",
        "/api/jobs/{job_id}/reject",
        statuses(401, 403, 403, 200),
        at("run"),
        {"reason": "no"},
    ),
    "reply": Row(
        "POST",
        "/api/jobs/{job_id}/reply",
        statuses(401, 403, 403, 200),
        at("review"),
        {"message": "more"},
    ),
    "cancel": Row("POST", "/api/jobs/{job_id}/cancel", statuses(401, 403, 403, 200), at("run")),
    "resume": Row("POST", "/api/jobs/{job_id}/resume", statuses(401, 403, 403, 200), at("blocked")),
    "retry": Row("POST", "/api/jobs/{job_id}/retry", statuses(401, 201, 403, 201), at("ended")),
    "dependency requests": Row(
        "GET", "/api/jobs/{job_id}/dependencies", statuses(401, 200, 403, 200), at("dependency")
    ),
    "approve dependency": Row(
        "POST",
        "/api/jobs/{job_id}/dependencies/{request_id}/approve",
        statuses(401, 403, 403, 200),
        at("dependency"),
    ),
    "reject dependency": Row(
        "POST",
        "/api/jobs/{job_id}/dependencies/{request_id}/reject",
        statuses(401, 403, 403, 200),
        at("dependency"),
        {"reason": "not that one"},
    ),
    "rooms": Row("GET", "/api/rooms", statuses(401, 200, 200, 200)),
    "groups": Row("GET", "/api/groups", statuses(401, 200, 200, 200)),
    "show group": Row(
        "GET", "/api/groups/{group}", statuses(401, 200, 403, 200), fields={"group": "default"}
    ),
    "add member": Row(
        "POST",
        "/api/groups/{group}/members",
        statuses(401, 403, 403, 200),
        body={"name": "carol", "role": "member"},
        fields={"group": "default"},
    ),
    "remove member": Row(
        "DELETE",
        "/api/groups/{group}/members/{name}",
        statuses(401, 403, 403, 200),
        fields={"group": "default", "name": "admin"},
    ),
    "agents": Row("GET", "/api/agents", statuses(401, 200, 200, 200)),
    # Named agents serve every group: an admin of any group decides them, carol included.
    "add agent": Row(
        "POST",
        "/api/agents",
        statuses(401, 403, 201, 201),
        None,
        {"name": "local-{caller}", "adapter": "openai", "model": "qwen"},
    ),
    "remove agent": Row("DELETE", "/api/agents/{name}", statuses(401, 403, 204, 204), an_agent),
    "schedules": Row("GET", "/api/schedules", statuses(401, 200, 200, 200)),
    "add schedule": Row(
        "POST",
        "/api/schedules",
        statuses(401, 201, 403, 201),
        None,
        {"name": "weekly-{caller}", **SCHEDULE},
    ),
    "remove schedule": Row(
        "DELETE", "/api/schedules/{name}", statuses(401, 403, 403, 204), a_schedule
    ),
    "fire schedule": Row(
        "POST", "/api/schedules/{name}/fire", statuses(401, 403, 403, 201), a_schedule
    ),
    "audit verify": Row("GET", "/api/audit/verify", statuses(401, 403, 200, 200)),
    # Room sample has no forge: its admin is told so (422); nobody else learns that much.
    "room check": Row(
        "GET", "/api/rooms/{room}/check", statuses(401, 403, 403, 422), fields={"room": "sample"}
    ),
    "room agent": Row(
        "PUT",
        "/api/rooms/{room}/agent",
        statuses(401, 403, 403, 200),
        body={"agent": None},
        fields={"room": "sample"},
    ),
    # A path on the server is refused even to its admin (422): such a room is made on the host.
    "create room": Row(
        "POST",
        "/api/rooms",
        statuses(401, 403, 403, 422),
        body={"name": "new-{caller}", "group": "default", "repo": "/srv/git/app"},
    ),
    "rebind room": Row(
        "POST",
        "/api/rooms/{room}/rebind",
        statuses(401, 403, 403, 422),
        body={"repo": "file:///srv/git/app"},
        fields={"room": "sample"},
    ),
    "audit head": Row("GET", "/api/audit/head", statuses(401, 403, 200, 200)),
    "audit log": Row("GET", "/api/audit/log", statuses(401, 403, 200, 200)),
    # Listing people names those of every group: an admin of some group, carol included.
    "users": Row("GET", "/api/users", statuses(401, 403, 200, 200)),
    "add user": Row(
        "POST",
        "/api/users",
        statuses(401, 403, 403, 201),
        body={"name": "new-{caller}", "group": "default"},
    ),
    # Alice replaces her own token; carol is no admin of any of alice's groups.
    "replace token": Row(
        "POST", "/api/users/{name}/token", statuses(401, 200, 403, 200), fields={"name": "alice"}
    ),
    "add group": Row(
        "POST",
        "/api/groups",
        statuses(401, 403, 201, 201),
        body={"name": "team-{caller}", "policy": {"dependency_approval": "member"}},
    ),
    "change policy": Row(
        "POST",
        "/api/groups/{group}/policy",
        statuses(401, 403, 403, 200),
        body={"settings": {"dependency_approval": "member"}, "reason": "we trust members"},
        fields={"group": "default"},
    ),
    "credentials": Row("GET", "/api/credentials", statuses(401, 403, 200, 200)),
    "store credential": Row(
        "POST",
        "/api/credentials",
        statuses(401, 403, 403, 201),
        body={"name": "bot-{caller}", "group": "default", "secret": "forge-token"},
    ),
    "remove credential": Row(
        "DELETE",
        "/api/credentials/{name}?group=default",
        statuses(401, 403, 403, 204),
        a_credential,
    ),
    "job events": Row("GET", "/api/jobs/{job_id}/events", statuses(401, 200, 403, 200), at("run")),
    "room events": Row(
        "GET", "/api/rooms/{room_id}/events", statuses(401, 200, 403, 200), fields={"room_id": 1}
    ),
}


def api_routes(api: Api) -> set[tuple[str, str]]:
    """Every (method, path) the app serves under /api, as its own schema declares them."""
    paths = create_app(api.team.config, store=api.team.store).openapi()["paths"]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


def test_every_endpoint_has_a_row(api: Api) -> None:
    rows = {(row.method, row.route.partition("?")[0]) for row in MATRIX.values()}
    assert api_routes(api) == rows


@pytest.mark.parametrize("endpoint", MATRIX)
def test_each_caller_gets_the_status_of_the_matrix(api: Api, endpoint: str) -> None:
    row = MATRIX[endpoint]
    assert set(row.expected) == set(CALLERS)
    for caller, name in CALLERS.items():
        values = dict(row.fields) | (row.setup(api, caller) if row.setup else {})
        url = row.route.format(**values)
        payload = (
            {k: _named(v, caller) for k, v in row.body.items()} if row.body is not None else None
        )
        status = _call(api, name, row.method, url, payload)
        assert status == row.expected[caller], f"{endpoint} as {caller}"


def _named(value: object, caller: str) -> object:
    # Only `{caller}` is filled in: a script's YAML has braces of its own.
    return value.replace("{caller}", caller) if isinstance(value, str) else value


def _call(api: Api, name: str | None, method: str, url: str, body: object) -> int:
    client = api.client(name)
    if url.endswith("/events"):
        with client.stream(method, url) as stream:
            return stream.status_code
    return client.request(method, url, json=body).status_code


def test_an_outsider_sees_none_of_another_groups_work(api: Api) -> None:
    _job(api, "run")
    a_schedule(api, "admin")
    carol = api.client("carol")
    assert carol.get("/api/jobs").json() == []
    assert carol.get("/api/rooms").json() == []
    assert carol.get("/api/schedules").json() == []
    assert [g["name"] for g in carol.get("/api/groups").json()] == ["others"]
    assert carol.get("/api/jobs", params={"room": "sample"}).status_code == 403
    alice = api.client("alice")
    assert [r["name"] for r in alice.get("/api/rooms").json()] == ["sample"]
    assert len(alice.get("/api/jobs").json()) == 1
    assert [s["name"] for s in alice.get("/api/schedules").json()] == ["nightly-admin"]


def test_an_outsider_learns_nothing_of_where_a_job_stands(api: Api) -> None:
    carol = api.client("carol")
    for where in ("run", "ended"):
        job = _job(api, where)
        for action, body in (("approve", None), ("reply", {"message": "m"}), ("cancel", None)):
            refused = carol.post(f"/api/jobs/{job}/{action}", json=body)
            assert refused.status_code == 403 and "not a member" in refused.json()["error"]


def test_a_dependency_decision_names_the_request_the_job_waits_on(api: Api) -> None:
    job = _job(api, "dependency")
    bob = api.client("bob")
    with api.team.store.begin() as conn:
        asked = dep_ledger.latest(conn, job).id
    assert bob.post(f"/api/jobs/{job}/dependencies/{asked + 99}/approve").status_code == 404
    listed = bob.get(f"/api/jobs/{job}/dependencies").json()
    assert [(d["name"], d["status"]) for d in listed] == [("rich", "pending")]
    approved = bob.post(f"/api/jobs/{job}/dependencies/{asked}/approve")
    assert approved.status_code == 200 and approved.json()["status"] == "queued"
    again = bob.post(f"/api/jobs/{job}/dependencies/{asked}/approve")
    assert again.status_code == 409 and "not the one the job waits on" in again.json()["error"]
    assert bob.get(f"/api/jobs/{job}/dependencies").json()[0]["status"] == "approved"
