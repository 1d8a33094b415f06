"""`cairn schedule` through the real CLI: add, list, fire, remove, and `cairn work` firing."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
import sqlalchemy as sa

from cairn.store import Store
from cairn.store.schema import schedules, utcnow

from .conftest import Cli
from .test_cli_startup import loaded, roots

pytestmark = pytest.mark.acceptance

WRITE = """
steps:
  - write: {path: notes.txt, content: "tidied\\n"}
  - finish: {summary: "Tidied the notes"}
"""


def add(
    cli: Cli, *extra: str, name: str = "nightly", cron: str = "0 3 * * *", expect: int = 0
) -> subprocess.CompletedProcess[str]:
    script = cli.script(WRITE)
    return cli(
        "schedule", "add", name, "sample", "Tidy the notes", "--cron", cron,
        "--agent", f"script:{script}", "--as", "alice", *extra, expect=expect,
    )  # fmt: skip


def added_long_ago(cli: Cli, name: str) -> None:
    """As if the schedule had been added three years ago, so its yearly time has passed."""
    store = Store.open(f"sqlite:///{cli.home / 'cairn.db'}")
    try:
        with store.begin() as conn:
            conn.execute(
                sa.update(schedules)
                .where(schedules.c.name == name)
                .values(created_at=utcnow() - timedelta(days=3 * 366))
            )
    finally:
        store.close()


def test_add_list_fire_work_and_remove(cli: Cli) -> None:
    cli.room()
    said = add(cli).stdout
    assert "schedule nightly added; it first fires at" in said and "UTC" in said
    [listed] = cli.json("schedule", "list")
    assert {k: listed[k] for k in ("name", "room", "cron", "request", "agent", "requester")} == {
        "name": "nightly",
        "room": "sample",
        "cron": "0 3 * * *",
        "request": "Tidy the notes",
        "agent": "script",
        "requester": "alice",
    }
    assert listed["next_fire_at"].endswith("03:00:00+00:00") and listed["last_job"] is None

    job = int(cli("schedule", "fire", "nightly").stdout)
    cli.work()
    detail = cli.show(job)
    assert detail["stage"] == "awaiting_review" and detail["requester"] == "alice"
    [after] = cli.json("schedule", "list")
    assert after["last_job"] == job and after["last_fire_at"] is not None
    assert f"(job {job})" in cli("schedule", "list").stdout

    assert "schedule nightly removed" in cli("schedule", "remove", "nightly").stdout
    assert cli.json("schedule", "list") == []
    assert cli.show(job)["id"] == job


def test_work_fires_a_due_schedule_once(cli: Cli) -> None:
    cli.room()
    add(cli, cron="0 0 1 1 *")
    added_long_ago(cli, "nightly")
    cli.work()
    [job] = cli.json("jobs")
    assert job["stage"] == "awaiting_review"
    cli.work()
    assert [j["id"] for j in cli.json("jobs")] == [job["id"]], "one job for one fire time"
    [listed] = cli.json("schedule", "list")
    assert listed["last_job"] == job["id"]
    assert listed["last_fire_at"].endswith("-01-01T00:00:00+00:00"), "the latest missed time"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--cron", "0 3 * *"), 2, "a cron expression has five fields"),
        (("--cron", "61 * * * *"), 2, "out of range"),
        (("--room", "elsewhere"), 1, "no room 'elsewhere'"),
        (("--request", " "), 2, "the request is empty"),
        (("--request", "push with ghp_" + "c3" * 18), 2, "looks like a credential"),
        (("--agent", "script:missing.yaml"), 2, "no script file named"),
        (("--agent", "nope:x"), 2, "valid adapters: aider, claude, codex, openai, script"),
        (("--as", "nobody"), 1, "no user 'nobody'"),
    ],
)
def test_invalid_input_is_one_clear_error(
    cli: Cli, args: tuple[str, str], code: int, message: str
) -> None:
    cli.room()
    given = {"--cron": "0 3 * * *", "--room": "sample", "--request": "Tidy", "--as": "alice"}
    given["--agent"] = f"script:{cli.script(WRITE)}"
    given[args[0]] = args[1]
    done = cli(
        "schedule", "add", "nightly", given["--room"], given["--request"],
        "--cron", given["--cron"], "--agent", given["--agent"], "--as", given["--as"],
        expect=code,
    )  # fmt: skip
    assert message in done.stderr and done.stderr.startswith("error: "), done.stderr
    assert done.stderr.count("\n") == 1, "one line"
    assert cli.json("schedule", "list") == []


def test_a_duplicate_name_an_unknown_schedule_and_lost_access_say_what_to_do(cli: Cli) -> None:
    cli.room()
    add(cli, cron="0 0 1 1 *")
    assert "already exists; pick another name" in add(cli, cron="0 0 1 1 *", expect=2).stderr
    for command in ("fire", "remove"):
        done = cli("schedule", command, "weekly", expect=1)
        assert "no schedule 'weekly'" in done.stderr
    cli("group", "member", "remove", "default", "alice")
    lost = cli("schedule", "fire", "nightly", expect=1)
    assert "alice is not a member of group default" in lost.stderr
    assert cli.json("schedule", "list")[0]["last_outcome"] is None, "a refusal records nothing"
    # Found due by a runner, the firing is recorded with the reason it made no job.
    added_long_ago(cli, "nightly")
    cli.work()
    assert cli.json("jobs") == []
    [listed] = cli.json("schedule", "list")
    assert listed["last_job"] is None and listed["last_outcome"] == "skipped"
    assert "alice is not a member" in listed["last_note"]
    assert "alice is not a member" in cli("schedule", "list").stdout


def test_help_does_not_import_croniter(cli: Cli) -> None:
    for args in (["--help"], ["schedule", "--help"], ["schedule", "add", "--help"]):
        assert "croniter" not in roots(loaded(args, cli.env)), args


def test_only_the_requester_or_a_group_admin_may_remove_or_fire_a_schedule(cli: Cli) -> None:
    cli.room()
    add(cli)
    cli("group", "add", "elsewhere")
    cli("user", "add", "bob", "--group", "elsewhere")
    cli("user", "add", "carol", "--group", "default")
    for who in ("bob", "carol"):
        for command in ("remove", "fire"):
            done = cli("schedule", command, "nightly", "--as", who, expect=1)
            assert done.stderr.startswith(f"error: {who} may not {command} schedule nightly")
            assert "only its requester (alice) or an admin of group default" in done.stderr
    assert [s["name"] for s in cli.json("schedule", "list")] == ["nightly"]
    assert cli.json("jobs") == [], "a refused fire submits nothing"
    job = int(cli("schedule", "fire", "nightly", "--as", "alice").stdout)
    assert cli.show(job)["requester"] == "alice"
    fired = cli.json("schedule", "fire", "nightly", "--as", "admin")
    assert cli.show(fired["job"])["requester"] == "alice", "an admin fires it as its requester"
    removed = cli("schedule", "remove", "nightly", "--as", "admin")
    assert "schedule nightly removed" in removed.stdout
    assert cli.json("schedule", "list") == []
