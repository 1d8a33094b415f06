"""Authority through the real `cairn` command, on a home made by a plain `cairn init`."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from acceptance.conftest import Cli

pytestmark = pytest.mark.acceptance

WRITE = 'steps:\n  - write: {path: w.txt, content: "w\\n"}\n  - finish: {summary: "added w"}\n'
ASKS = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - finish: {summary: "added a"}
"""


def _sql(cli: Cli, statement: str, *params: object) -> list[tuple]:
    with closing(sqlite3.connect(cli.home / "cairn.db")) as db, db:
        return db.execute(statement, params).fetchall()


def _error(done) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_lone_admin_is_told_why_their_run_waits_and_cannot_approve_it(cli: Cli) -> None:
    cli.room()
    script = cli.script(WRITE)
    ran = cli("run", "sample", "Add w.txt", "--agent", f"script:{script}")
    lines = ran.stdout.splitlines()
    assert lines[-2].endswith("awaiting_run_approval (waiting)")
    assert "other than the requester" in lines[-1] and "`cairn approve 1" in lines[-1]
    assert "cairn user add NAME --admin" in lines[-1]
    assert lines[-1] == (
        "job 1: waits at the run gate; an admin other than the requester approves it with "
        "`cairn approve 1 --as NAME` (a requester never approves their own run, even as an "
        "admin); `cairn reject 1 --reason ...` rejects it; alone? add a second admin with "
        "`cairn user add NAME --admin`; or let the policy approve interactive runs with "
        "`cairn group policy default --run-approval auto --auto-kinds interactive`"
    ), "one line, each command once"
    # The waiting job carries the same steps, structured.
    [waiting] = cli.json("jobs")
    assert waiting["next"] == [
        {"action": "approve_run", "job": 1},
        {"action": "reject", "job": 1},
        {"action": "add_admin"},
        {"action": "auto_approve_runs", "group": "default"},
    ]

    refused = _error(cli("approve", "1", expect=1))
    assert "cannot approve its run, even as an admin" in refused
    assert "only an admin" in _error(cli("approve", "1", "--as", "alice", expect=1))

    cli("user", "add", "bob", "--admin")
    cli("approve", "1", "--as", "bob")
    cli.work()
    [review] = cli.json("jobs")
    assert (review["stage"], review["next"]) == (
        "awaiting_review",
        [{"action": a, "job": 1} for a in ("review", "approve", "reply", "reject")],
    )
    cli("reject", "1", "--reason", "on second thought, no")  # admin rejects their own PR
    shown = cli.show(1)
    assert [(d["gate"], d["verdict"], d["actor"]) for d in shown["decisions"]] == [
        ("run", "approved", "bob"),
        ("integration", "rejected", "admin"),
    ]


def test_tokens_are_shown_once_and_stored_only_as_hashes(cli: Cli) -> None:
    added = cli.json("user", "add", "dave")
    first = added["token"]
    assert added | {"token": None} == {
        "name": "dave",
        "group": "default",
        "role": "member",
        "token": None,
    }
    second = json.loads(cli("user", "token", "dave", "--json").stdout)["token"]
    assert first != second and second.startswith("cairn_")
    store_bytes = b"".join(p.read_bytes() for p in cli.home.glob("cairn.db*"))
    assert first.encode() not in store_bytes and second.encode() not in store_bytes
    assert _sql(cli, "SELECT count(*) FROM users WHERE token_hash IS NOT NULL")[0][0] == 2
    assert all(
        len(row[0]) == 64
        for row in _sql(cli, "SELECT token_hash FROM users WHERE token_hash IS NOT NULL")
    )
    assert "replace" in _error(cli("user", "token", "admin", "--as", "dave", expect=1))
    users = {u["name"]: u for u in cli.json("user", "list")}
    assert users["dave"] == {"name": "dave", "groups": {"default": "member"}, "has_token": True}
    listed = cli("user", "list").stdout
    assert first not in listed and second not in listed


def test_policy_changes_are_decisions_and_retry_leaves_the_old_job_alone(cli: Cli) -> None:
    cli.room()
    assert "only an admin" in _error(
        cli("group", "policy", "default", "--run-approval", "auto", "--as", "alice", expect=1)
    )
    changed = cli.json(
        "group", "policy", "default", "--run-approval", "auto", "--auto-kinds", "interactive"
    )
    assert (changed["run_approval"], changed["auto_approve_kinds"]) == ("auto", ["interactive"])
    job = cli.submit(WRITE)
    cli.work()
    cli("reject", str(job), "--reason", "not now")
    before = cli.show(job)

    retried = json.loads(cli("retry", str(job), "--json", "--as", "alice").stdout)
    assert retried == {"id": job + 1}
    assert cli.show(job) == before, "the rejected job's record is untouched"
    new = cli.show(retried["id"])
    assert (new["retry_of"], new["request"]) == (job, before["request"])
    # A retry meets the run gate at once, like a submit: this policy approves it.
    assert (new["stage"], new["status"]) == ("awaiting_run_approval", "queued")
    assert [(d["gate"], d["verdict"]) for d in new["decisions"]] == [("run", "auto")]
    assert "has not ended" in _error(cli("retry", str(retried["id"]), expect=1))

    logged = cli.json("audit", "log", "--policy")
    assert [(d["job"], d["gate"], d["verdict"], d["actor"]) for d in logged] == [
        (None, "policy", "changed", "admin")
    ]
    assert [d["gate"] for d in cli.json("audit", "log", "--job", str(job))] == [
        "run",
        "integration",
    ]
    policy_rows = _sql(cli, "SELECT id, actor, reason, policy FROM decisions WHERE gate='policy'")
    assert len(policy_rows) == 1 and policy_rows[0][1] == "admin"
    assert policy_rows[0][2].startswith("before: run_approval=admin")
    assert policy_rows[0][3].startswith("group default: run_approval=auto(interactive)")
    _sql(cli, "UPDATE decisions SET actor = 'alice' WHERE id = ?", policy_rows[0][0])
    broken = cli("audit", "verify", expect=1)
    assert f"decision {policy_rows[0][0]} is broken" in broken.stderr


def test_a_removed_requester_blocks_the_job_at_the_gate_until_added_back(cli: Cli) -> None:
    cli.room()
    job = cli.submit(ASKS)
    cli.work()
    cli("approve", str(job))
    cli.work()
    assert cli.show(job)["stage"] == "awaiting_dependency_approval"

    cli("group", "member", "remove", "default", "alice")
    refused = _error(cli("approve", str(job), expect=1))
    assert "not approved and is now blocked" in refused
    assert "alice is no longer a member of group default" in refused
    blocked = cli.show(job)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "awaiting_dependency_approval")
    assert "no longer a member" in _error(cli("resume", str(job), expect=1))

    cli("group", "member", "add", "default", "alice")
    assert "waits at awaiting_dependency_approval again" in cli("resume", str(job)).stdout
    assert cli.show(job)["next"] == [
        {"action": "approve_dependency", "job": job},
        {"action": "reject", "job": job},
    ], "waiting again, it offers the gate's decisions again"
    cli("approve", str(job))
    cli.work()
    assert cli.show(job)["stage"] == "awaiting_review"


def test_groups_and_rooms_belong_to_their_admins(cli: Cli) -> None:
    assert "only an admin of a group" in _error(
        cli("group", "add", "side", "--as", "alice", expect=1)
    )
    cli("group", "add", "infra", "--dependency-approval", "member")
    shown = cli.json("group", "show", "infra")
    assert shown["members"] == [{"name": "admin", "role": "admin"}]
    assert shown["policy"]["dependency_approval"] == "member"
    denied = cli("room", "create", "r2", "--repo", str(cli.repo), "--as", "alice", expect=1)
    assert "only an admin of group default" in _error(denied)
    assert "last admin" in _error(cli("group", "member", "remove", "infra", "admin", expect=2))


def test_approve_works_right_after_submit(cli: Cli) -> None:
    cli.room()
    cli("user", "add", "bob", "--admin")
    job = cli.submit(WRITE)  # no runner has looked at it
    (listed,) = cli.json("jobs")
    assert (listed["id"], listed["stage"], listed["status"]) == (
        job,
        "awaiting_run_approval",
        "waiting",
    )
    approved = cli("approve", str(job), "--as", "bob")
    assert f"job {job}: approved at awaiting_run_approval" in approved.stdout
    cli.work()
    shown = cli.show(job)
    assert (shown["stage"], shown["status"]) == ("awaiting_review", "waiting")
    assert [(d["gate"], d["verdict"], d["actor"]) for d in shown["decisions"]] == [
        ("run", "approved", "bob")
    ]


def test_a_stored_next_action_cairn_does_not_know_is_a_damaged_store_not_a_traceback(
    cli: Cli,
) -> None:
    cli.room()
    job = cli.submit(WRITE)
    _sql(cli, "UPDATE jobs SET next_actions = ? WHERE id = ?", '[{"action": "teleport"}]', job)
    assert _error(cli("jobs", expect=1)) == (
        "error: the store is damaged: a job's next actions are not ones this cairn knows; "
        "restore the store from a backup, or upgrade cairn if a newer one wrote it"
    )
