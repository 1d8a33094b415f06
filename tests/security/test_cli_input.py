"""Bad input through the real `cairn` command: one clear line, the right exit code, nothing
stored. Usage and input errors exit 2, everything else 1; under `--json` the error is JSON.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from contextlib import closing

import pytest

from acceptance.conftest import CAIRN, CALL_TIMEOUT, Cli
from cairn.agents.script_format import MAX_SCRIPT_BYTES
from cairn.cli.context import MAX_ID
from cairn.jobs.submit import REQUEST_LIMIT

pytestmark = pytest.mark.acceptance

ID_COMMANDS = [
    ["show"],
    ["approve"],
    ["reject", "--reason", "r"],
    ["cancel"],
    ["resume"],
    ["retry"],
    ["audit", "log", "--job"],
]
BAD_IDS = ["99999999999999999999", str(2**63), str(MAX_ID + 1), "0", "-1", "-99999999999"]
TOKEN = "ghp_" + "Z9y8X7w6" * 5


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def _rows(cli: Cli, table: str) -> list[tuple]:
    with closing(sqlite3.connect(cli.home / "cairn.db")) as db:
        return db.execute(f"SELECT * FROM {table}").fetchall()


@pytest.mark.parametrize("command", ID_COMMANDS, ids=lambda c: " ".join(c))
def test_an_id_out_of_range_is_a_usage_error_on_sqlite(cli: Cli, command: list[str]) -> None:
    for bad in BAD_IDS:
        line = _error_line(cli(*command, bad, expect=2))
        assert "--help" in line


@pytest.mark.postgres
def test_an_id_out_of_range_is_a_usage_error_on_postgres(cli: Cli, postgres_url: str) -> None:
    env = {"CAIRN_DATABASE_URL": postgres_url}
    cli("init", env=env)
    for command in ID_COMMANDS:
        line = _error_line(cli(*command, "99999999999999999999", expect=2, env=env))
        assert "CAIRN_DATABASE_URL" not in line
    assert f"no job {MAX_ID}" in _error_line(cli("show", str(MAX_ID), expect=1, env=env))


def test_the_largest_id_is_simply_no_job_on_sqlite(cli: Cli) -> None:
    assert f"no job {MAX_ID}" in _error_line(cli("show", str(MAX_ID), expect=1))


def _raw(cli: Cli, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(CAIRN), *args],
        env=cli.env,
        cwd=cli.tmp,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=CALL_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_an_argument_that_is_not_utf8_is_refused_in_one_line(cli: Cli) -> None:
    cli.room()
    script = cli.script("steps: [finish: {}]\n")
    for args in (
        [b"submit", b"sample", b"fix \xff\xfe it", b"--agent", f"script:{script}".encode()],
        [b"user", b"add", b"al\xe9"],
        [b"show", b"1", b"--as", b"\xc3"],
    ):
        done = _raw(cli, *args)
        assert done.returncode == 2, done.stderr
        assert "not valid UTF-8" in _error_line(done)
    assert _rows(cli, "requests") == []


def test_a_script_over_the_size_limit_is_refused_unparsed(cli: Cli) -> None:
    cli.room()
    head = "steps: [write: {path: a.txt, content: '"
    over = head + "x" * MAX_SCRIPT_BYTES + "'}]\n"
    done = cli("submit", "sample", "x", "--agent", f"script:{cli.script(over)}", expect=2)
    assert f"larger than {MAX_SCRIPT_BYTES // 1024} KiB" in _error_line(done)
    at_limit = head + "x" * (MAX_SCRIPT_BYTES - len(head) - 4) + "'}]\n"
    assert len(at_limit.encode()) == MAX_SCRIPT_BYTES
    cli("submit", "sample", "x", "--agent", f"script:{cli.script(at_limit)}", "--as", "alice")


def test_a_request_over_the_size_limit_or_only_control_characters_is_refused(cli: Cli) -> None:
    cli.room()
    script = f"script:{cli.script('steps: [finish: {}]')}"
    long = cli("submit", "sample", "x" * (REQUEST_LIMIT + 1), "--agent", script, expect=2)
    assert f"longer than {REQUEST_LIMIT}" in _error_line(long)
    empty = cli("submit", "sample", "\x1b[8m\x1b]0;t\x07 ", "--agent", script, expect=2)
    assert "request is empty" in _error_line(empty)
    assert _rows(cli, "requests") == []


def test_an_agent_spec_carrying_a_credential_is_refused_and_not_stored(cli: Cli) -> None:
    cli.room()
    carrying = [
        f'steps: [fail: "Traceback: the server refused {TOKEN}"]',
        "steps: [run: 'git clone https://deploy:s3cretPassw0rd@git.example.com/app.git']",
        "steps:\n  - write: {path: a.txt, content: x}\n"
        f"  - finish: {{summary: 'done with Authorization: Bearer {TOKEN[4:]}'}}",
    ]
    for step, text in zip((1, 1, 2), carrying, strict=True):
        done = cli("submit", "sample", "x", "--agent", f"script:{cli.script(text)}", expect=2)
        line = _error_line(done)
        assert "looks like a credential" in line and f"in step {step} (" in line
        assert TOKEN[4:] not in line and "s3cretPassw0rd" not in line
    stored = json.dumps(_rows(cli, "requests"))
    assert stored == "[]", "a refused spec leaves no request row"


def test_a_clean_agent_spec_is_stored_as_parsed(cli: Cli) -> None:
    cli.room()
    job = cli.submit("steps: [fail: 'could not find the entry point']")
    (agent,) = _sql_agent(cli, job)
    assert json.loads(agent[0])["script"] == {"steps": [{"fail": "could not find the entry point"}]}


def _sql_agent(cli: Cli, job: int) -> list[tuple]:
    with closing(sqlite3.connect(cli.home / "cairn.db")) as db:
        query = "SELECT r.agent FROM requests r JOIN jobs j ON j.request_id = r.id WHERE j.id = ?"
        return db.execute(query, (job,)).fetchall()


def test_malformed_and_missing_scripts_and_repositories_exit_2(cli: Cli) -> None:
    cli.room()
    malformed = cli.script("steps: [\n")
    missing = cli.tmp / "scripts" / "missing.yaml"
    for agent in (f"script:{malformed}", f"script:{missing}", "nope:x"):
        _error_line(cli("submit", "sample", "x", "--agent", agent, expect=2))
    for repo in (str(cli.tmp / "nowhere"), "file:///nonexistent/repo.git", "https://127.0.0.1:9/x"):
        _error_line(cli("room", "create", "r2", "--repo", repo, expect=2))
    assert "no job 42" in _error_line(cli("show", "42", expect=1))


def test_click_usage_errors_are_one_line_with_exit_2(cli: Cli) -> None:
    for args in (["show"], ["show", "1", "--bogus"], ["reject", "1"], ["bogus"], ["show", "x"]):
        done = cli(*args, expect=2)
        assert done.stdout == ""
        assert "--help`" in _error_line(done)
    done = cli("user", expect=0)
    assert "add" in done.stdout and done.stderr == ""


def test_errors_under_json_are_one_json_document_on_stderr(cli: Cli) -> None:
    for args, code in (
        (["show", "42", "--json"], 1),
        (["show", "99999999999999999999", "--json"], 2),
        (["jobs", "--room", "nowhere", "--json"], 1),
        (["show", "1", "--json", "--bogus"], 2),
    ):
        done = cli(*args, expect=code)
        assert done.stdout == ""
        error = json.loads(done.stderr)
        assert list(error) == ["error"] and error["error"] and "\n" not in error["error"]


def test_user_names_are_ascii_and_case_folded(cli: Cli) -> None:
    cyrillic = "\u0430dmin"  # the first letter is Cyrillic
    for name in (cyrillic, "ädmin", "a b", ".alice", "", "x" * 65, "al\x1bice"):
        done = cli("user", "add", name, expect=2)
        assert "ASCII letters" in _error_line(done)
    added = cli("user", "add", "Carol", "--json")
    assert json.loads(added.stdout)["name"] == "carol"
    assert "already exists" in _error_line(cli("user", "add", "CAROL", expect=2))
    assert "carol" in cli("user", "list").stdout and "Carol" not in cli("user", "list").stdout
    cli("group", "member", "add", "default", "CAROL", "--as", "ADMIN")


def test_the_acting_user_from_as_or_cairn_user_is_checked_and_folded(cli: Cli) -> None:
    cli.room()
    script = f"script:{cli.script('steps: [finish: {}]')}"
    job = cli.json("submit", "sample", "x", "--agent", script, "--as", "Alice")
    assert cli.show(job["id"])["requester"] == "alice"
    refused = cli("cancel", str(job["id"]), expect=2, env={"CAIRN_USER": "\u0430lice"})
    assert "CAIRN_USER must name a user" in _error_line(refused)
    refused = cli("cancel", str(job["id"]), "--as", "al ice", expect=2)
    assert "--as must name a user" in _error_line(refused)
    cli("cancel", str(job["id"]), env={"CAIRN_USER": "ALICE"})


def test_a_usage_error_quoting_a_token_masks_it(cli: Cli) -> None:
    for args in (["show", TOKEN], ["show", "1", f"--{TOKEN}"], [TOKEN], ["show", TOKEN, "--json"]):
        done = cli(*args, expect=2)
        assert TOKEN[4:] not in done.stderr, done.stderr
    assert "no such command '[secret]'" in _error_line(cli(TOKEN, expect=2)).lower()
