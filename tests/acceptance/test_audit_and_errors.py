"""The decision chain's tamper evidence, and what the CLI says when something is wrong."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from .conftest import Cli

pytestmark = pytest.mark.acceptance

ASKS_FOR_RICH = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - finish: {summary: "Added a.txt"}
"""


def _sql(cli: Cli, statement: str, *params: object) -> list[tuple]:
    with closing(sqlite3.connect(cli.home / "cairn.db")) as db, db:
        return db.execute(statement, params).fetchall()


def test_audit_verify_detects_an_edited_decision_and_names_it(cli: Cli) -> None:
    cli.room()
    job = cli.submit(ASKS_FOR_RICH)
    cli.work()
    cli("approve", str(job), "--reason", "exact pin reviewed")
    cli.work()
    cli("reject", str(job), "--reason", "not this way")
    rows = _sql(cli, "SELECT id, gate, verdict, reason FROM decisions ORDER BY id")
    assert [r[1:] for r in rows] == [
        ("run", "auto", None),
        ("dependency", "approved", "exact pin reviewed"),
        ("integration", "rejected", "not this way"),
    ]
    dependency_id, integration_id = rows[1][0], rows[2][0]

    intact = cli("audit", "verify")
    assert "intact" in intact.stdout and "3 decisions" in intact.stdout
    assert json.loads(cli("audit", "verify", "--json").stdout) == {
        "ok": True,
        "checked": 3,
        "broken_id": None,
    }

    _sql(cli, "UPDATE decisions SET reason = ? WHERE id = ?", "anything goes", dependency_id)
    broken = cli("audit", "verify", expect=1)
    assert f"decision {dependency_id} is broken" in broken.stderr
    assert "intact" not in broken.stdout
    report = json.loads(cli("audit", "verify", "--json", expect=1).stdout)
    assert report["ok"] is False and report["broken_id"] == dependency_id

    _sql(cli, "UPDATE decisions SET reason = ? WHERE id = ?", "exact pin reviewed", dependency_id)
    _sql(cli, "UPDATE decisions SET verdict = 'approved' WHERE id = ?", integration_id)
    report = json.loads(cli("audit", "verify", "--json", expect=1).stdout)
    assert (report["ok"], report["broken_id"], report["checked"]) == (False, integration_id, 2)


def _one_error_line(done) -> str:
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_errors_are_one_line_with_the_right_exit_code_and_no_local_path(cli: Cli) -> None:
    cli.room()
    queued = cli.submit(ASKS_FOR_RICH)  # no runner yet: the job is queued, at no gate

    assert "no job 99" in _one_error_line(cli("show", "99", expect=1))
    assert "not waiting at a gate" in _one_error_line(cli("approve", str(queued), expect=1))
    assert "not blocked" in _one_error_line(cli("resume", str(queued), expect=1))
    assert "no room" in _one_error_line(
        cli("submit", "nowhere", "x", "--agent", f"script:{cli.script('steps: []')}", expect=1)
    )

    missing = cli.tmp / "scripts" / "missing-agent.yaml"
    line = _one_error_line(cli("submit", "sample", "x", "--agent", f"script:{missing}", expect=2))
    assert "missing-agent.yaml" in line and str(missing.parent) not in line
    line = _one_error_line(cli("submit", "sample", "x", "--agent", f"{cli.tmp}/x.yaml", expect=2))
    assert "names no known agent or adapter" in line and str(cli.tmp) not in line
    line = _one_error_line(cli("room", "create", "r2", "--repo", str(cli.tmp / "nope"), expect=2))
    assert "not a git repository" in line
    line = _one_error_line(cli("jobs", expect=2, env={"CAIRN_LEASE_SECONDS": "soon"}))
    assert "CAIRN_LEASE_SECONDS" in line

    for usage in (["show", "1", "--no-such-option"], ["show", "one"], ["no-such-command"]):
        assert "--help`" in _one_error_line(cli(*usage, expect=2))

    assert cli.show(queued)["status"] == "queued", "no refused command changed the job"


def test_a_command_before_init_says_to_run_init(fresh_cli: Cli) -> None:
    line = _one_error_line(fresh_cli("jobs", expect=1))
    assert "cairn init" in line
    assert not fresh_cli.home.exists(), "a read command creates no home"


def test_a_command_before_init_creates_no_store_file(fresh_cli: Cli) -> None:
    fresh_cli.home.mkdir()
    line = _one_error_line(fresh_cli("jobs", expect=1))
    assert "cairn init" in line
    assert list(fresh_cli.home.iterdir()) == [], "no store file appears before `cairn init`"


def test_text_from_people_and_agents_is_printed_literally(cli: Cli) -> None:
    cli.room()
    request = "Fix the [/] parsing of [bold]x[/bold] tags"
    failure = "expected [x] but the list was [/] empty"
    script = cli.script(
        f'steps:\n  - write: {{path: z.txt, content: "z"}}\n  - fail: "{failure}"\n'
    )
    ran = cli("run", "sample", request, "--agent", f"script:{script}", expect=1)
    assert f"job 1: {failure}" in ran.stdout
    assert request in cli("jobs").stdout
    shown = cli("show", "1").stdout
    assert request in shown and failure in shown
