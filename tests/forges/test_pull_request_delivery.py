"""Delivery as a pull request: exactly one per job, whatever crashes or is lost on the way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.acceptance.conftest import CAIRN, CALL_TIMEOUT, Cli, _new_cli

from cairn.testing.fake_forge import FakeForge

pytestmark = pytest.mark.acceptance
REPO = "acme/app"
SCRIPT = """
steps:
  - write: {path: src/hello.py, content: "def hello():\\n    return 'hello'\\n"}
  - finish: {summary: "Added hello()."}
"""
CREATE = r"/(pulls|merge_requests)$"


def _room(cli: Cli, forge: FakeForge, delivery: str) -> dict[str, str]:
    assert forge.test_token is not None
    env = {"FORGE_TOKEN": forge.test_token}
    cli(
        "room", "create", "sample", "--forge", forge.kind, "--forge-repo", REPO,
        "--forge-url", forge.url, "--forge-token-env", "FORGE_TOKEN", "--delivery", delivery,
        env=env,
    )  # fmt: skip
    return env


def _approved_job(cli: Cli, env: dict[str, str]) -> int:
    job = cli.submit(SCRIPT)
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "awaiting_review"
    cli("approve", str(job))
    return job


def _opens(forge: FakeForge) -> int:
    return sum(1 for c in forge.calls if c.method == "POST" and c.path.endswith(("/pulls",
               "/merge_requests")))  # fmt: skip


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_a_job_is_delivered_as_one_pull_request(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    base = fake_forge.branch_sha(REPO, "main")
    job = _approved_job(cli, env)
    cli("work", "--until-idle", env=env)
    done = cli.show(job)
    assert (done["status"], done["stage"]) == ("completed", "completed")
    [pull] = fake_forge.pulls(REPO)
    assert pull.head == done["branch"] and pull.base == "main" and pull.state == "open"
    assert f"\ncairn job {job} of installation " in pull.body and "Added hello()." in pull.body
    effects = [(e["kind"], e["status"]) for e in done["effects"]]
    assert effects == [("push", "done"), ("pull_request", "done")]
    assert fake_forge.branch_sha(REPO, "main") == base, "merging is left to the forge"
    fake_forge.set_check(REPO, pull.head, "tests", "success")
    fake_forge.add_review(REPO, pull.number, "bob")
    shown = json.loads(cli("show", str(job), "--json", env=env).stdout)["pull_request"]
    assert (shown["number"], shown["state"]) == (pull.number, "open")
    assert shown["url"].startswith(fake_forge.url)
    assert shown["checks"] == [{"name": "tests", "state": "success"}]
    assert shown["reviews"] == [{"user": "bob", "state": "approved"}]
    unreachable = cli.show(job)["pull_request"]  # this shell lacks FORGE_TOKEN
    assert unreachable["number"] == pull.number and "FORGE_TOKEN" in unreachable["error"]


def test_a_lost_response_leaves_one_pull_request(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _approved_job(cli, env)
    fake_forge.fail_after("POST", CREATE)
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked", blocked
    assert "broke before it answered" in blocked["diagnosis"]
    assert len(fake_forge.pulls(REPO)) == 1
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "completed"
    assert len(fake_forge.pulls(REPO)) == 1 and _opens(fake_forge) == 1


def test_a_runner_killed_after_the_forge_opened_it_leaves_one_pull_request(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _approved_job(cli, env)
    killed = subprocess.run(
        [str(CAIRN), "work", "--until-idle"],
        env=cli.env | env | {"CAIRN_FAULTS": "crash:after_effect:pull_request"},
        cwd=cli.tmp, capture_output=True, text=True, timeout=CALL_TIMEOUT,
    )  # fmt: skip
    assert killed.returncode == 137, killed.stderr
    assert len(fake_forge.pulls(REPO)) == 1
    assert [e["status"] for e in cli.show(job)["effects"] if e["kind"] == "pull_request"] == [
        "intended"
    ]
    cli("work", "--until-idle", env=env)
    done = cli.show(job)
    assert done["stage"] == "completed"
    assert len(fake_forge.pulls(REPO)) == 1 and _opens(fake_forge) == 1
    [effect] = [e for e in done["effects"] if e["kind"] == "pull_request"]
    assert effect["status"] == "done"


def test_a_pull_request_closed_by_hand_blocks_the_job(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _approved_job(cli, env)
    fake_forge.fail_after("POST", CREATE)
    cli("work", "--until-idle", env=env)
    [pull] = fake_forge.pulls(REPO)
    fake_forge.close_by_hand(REPO, pull.number)
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked"
    assert "closed on the forge, not by cairn" in blocked["diagnosis"]
    assert [p.state for p in fake_forge.pulls(REPO)] == ["closed"], "never reopened"


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_pull_request_and_merge_merges_through_the_api_respecting_protection(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge, "pull_request_and_merge")
    fake_forge.protect(REPO, "main", approvals=1)
    job = _approved_job(cli, env)
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked"
    assert "approving review" in blocked["diagnosis"]
    [pull] = fake_forge.pulls(REPO)
    fake_forge.add_review(REPO, pull.number, "bob")
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "completed"
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "merged"
    assert fake_forge.branch_sha(REPO, "main") == pull.merge_sha


def test_two_installations_on_one_forge_repo_each_get_their_own_pull_request(
    cli: Cli, fake_forge: FakeForge, tmp_path: Path
) -> None:
    """Job ids restart in every store: installation two's job 1 must not adopt installation
    one's pull request for its job 1 (the body's key line names the installation)."""
    other_tmp = tmp_path / "other"
    other_tmp.mkdir()
    other = _new_cli(other_tmp, other_tmp / "home")
    other("init", "--run-approval", "auto", "--auto-kinds", "interactive,scheduled")
    other("user", "add", "alice")
    jobs = []
    for installation in (cli, other):
        env = _room(installation, fake_forge, "pull_request")
        jobs.append(_approved_job(installation, env))
        installation("work", "--until-idle", env=env)
    assert jobs == [1, 1]
    pulls = fake_forge.pulls(REPO)
    assert len({p.head for p in pulls}) == 2, f"installation two adopted one's PR: {pulls}"
    assert len({p.body.splitlines()[-1] for p in pulls}) == 2
