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


def _job_at_review(cli: Cli, env: dict[str, str], script: str = SCRIPT) -> int:
    job = cli.submit(script)
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "awaiting_review"
    return job


def _approved_job(cli: Cli, env: dict[str, str]) -> int:
    job = _job_at_review(cli, env)
    cli("approve", str(job))
    return job


def _opens(forge: FakeForge) -> int:
    return sum(1 for c in forge.calls if c.method == "POST" and c.path.endswith(("/pulls",
               "/merge_requests")))  # fmt: skip


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_the_pull_request_is_a_draft_at_review_and_ready_once_approved(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge, "pull_request")
    base = fake_forge.branch_sha(REPO, "main")
    job = _job_at_review(cli, env)
    waiting = cli.show(job)
    [pull] = fake_forge.pulls(REPO)
    assert (pull.head, pull.base, pull.state, pull.draft) == (
        waiting["branch"],
        "main",
        "open",
        True,
    )
    assert f"\ncairn job {job} of installation " in pull.body and "Added hello()." in pull.body
    assert fake_forge.branch_sha(REPO, pull.head) not in (None, base), "the branch is pushed"
    effects = [(e["kind"], e["status"]) for e in waiting["effects"]]
    assert effects == [("push", "done"), ("pull_request", "done")]
    shown = json.loads(cli("show", str(job), "--json", env=env).stdout)["pull_request"]
    assert (shown["number"], shown["state"], shown["draft"]) == (pull.number, "open", True)
    cli("approve", str(job))
    cli("work", "--until-idle", env=env)
    done = cli.show(job)
    assert (done["status"], done["stage"]) == ("completed", "completed")
    [pull] = fake_forge.pulls(REPO)
    assert (pull.state, pull.draft) == ("open", False), "marked ready for review, not merged"
    effects = [(e["kind"], e["status"]) for e in done["effects"]]
    assert effects == [("push", "done"), ("pull_request", "done"), ("pull_request_ready", "done")]
    assert fake_forge.branch_sha(REPO, "main") == base, "merging is left to the forge"
    assert _opens(fake_forge) == 1


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_checks_and_reviews_appear_in_show_json(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _job_at_review(cli, env)
    [pull] = fake_forge.pulls(REPO)
    fake_forge.set_check(REPO, pull.head, "tests", "success")
    fake_forge.set_check(REPO, pull.head, "lint", "pending")
    fake_forge.add_review(REPO, pull.number, pull.author)  # the requester's own approval
    fake_forge.add_review(REPO, pull.number, "bob")
    shown = json.loads(cli("show", str(job), "--json", env=env).stdout)["pull_request"]
    assert (shown["number"], shown["state"]) == (pull.number, "open")
    assert shown["url"].startswith(fake_forge.url) and str(pull.number) in shown["url"]
    assert sorted(shown["checks"], key=lambda c: c["name"]) == [
        {"name": "lint", "state": "pending"},
        {"name": "tests", "state": "success"},
    ]
    assert {"user": "bob", "state": "approved"} in shown["reviews"]
    assert shown["approvals"] == 1, "the author's own approval does not count"
    unreachable = cli.show(job)["pull_request"]  # this shell lacks FORGE_TOKEN
    assert unreachable["number"] == pull.number and "FORGE_TOKEN" in unreachable["error"]


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_a_rejection_closes_the_pull_request_with_the_reason(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _job_at_review(cli, env)
    why = "Please keep hello() out of src; it belongs in the examples."
    said = cli("reject", str(job), "--reason", why)  # no forge token here: a runner closes it
    assert "a runner (`cairn work`) closes its pull request" in said.stdout
    rejected = cli.show(job)
    assert (rejected["status"], rejected["stage"]) == ("rejected", "rejected")
    assert rejected["decisions"][-1]["verdict"] == "rejected"
    assert rejected["decisions"][-1]["reason"] == why
    assert [p.state for p in fake_forge.pulls(REPO)] == ["open"]
    cli("work", "--until-idle", env=env)
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "closed" and not pull.closed_by_hand
    assert pull.comments == [f"Rejected in cairn by admin: {why}"]
    closes = [e for e in cli.show(job)["effects"] if e["kind"] == "pull_request_close"]
    assert [e["status"] for e in closes] == ["done"]
    cli("work", "--until-idle", env=env)
    assert fake_forge.pulls(REPO)[0].comments == [f"Rejected in cairn by admin: {why}"], "once"


FOLLOWED_UP = """
steps:
  - write: {path: src/hello.py, content: "def hello():\\n    return 'hi'\\n"}
  - finish: {summary: "Added hello()."}
  - write: {path: src/hello.py, content: "def hello() -> str:\\n    return 'hello'\\n"}
  - finish: {summary: "hello() now returns 'hello', typed, as asked."}
"""


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_a_follow_up_updates_the_same_pull_request(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _job_at_review(cli, env, FOLLOWED_UP)
    [first] = fake_forge.pulls(REPO)
    before = fake_forge.branch_sha(REPO, first.head)
    cli("reply", str(job), "Return 'hello' and add a type hint")
    cli("work", "--until-idle", env=env)
    back = cli.show(job)
    assert (back["stage"], back["status"]) == ("awaiting_review", "waiting")
    [pull] = fake_forge.pulls(REPO)
    assert pull.number == first.number and _opens(fake_forge) == 1, "never a second PR"
    after = fake_forge.branch_sha(REPO, pull.head)
    assert after not in (None, before), "the same branch moved to the follow-up's commit"
    assert "typed, as asked" in back["review"]["summary"]
    shown = json.loads(cli("show", str(job), "--json", env=env).stdout)["pull_request"]
    assert shown["number"] == first.number
    cli("approve", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "completed"
    assert len(fake_forge.pulls(REPO)) == 1 and fake_forge.pulls(REPO)[0].draft is False


def test_a_lost_response_leaves_one_pull_request(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    fake_forge.fail_after("POST", CREATE)
    job = cli.submit(SCRIPT)
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked", blocked
    assert "broke before it answered" in blocked["diagnosis"]
    assert len(fake_forge.pulls(REPO)) == 1
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "awaiting_review"
    cli("approve", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "completed"
    assert len(fake_forge.pulls(REPO)) == 1 and _opens(fake_forge) == 1


def test_a_runner_killed_after_the_forge_opened_it_leaves_one_pull_request(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = cli.submit(SCRIPT)
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
    assert cli.show(job)["stage"] == "awaiting_review"
    cli("approve", str(job))
    cli("work", "--until-idle", env=env)
    done = cli.show(job)
    assert done["stage"] == "completed"
    assert len(fake_forge.pulls(REPO)) == 1 and _opens(fake_forge) == 1
    [effect] = [e for e in done["effects"] if e["kind"] == "pull_request"]
    assert effect["status"] == "done"


def test_a_pull_request_closed_by_hand_blocks_the_job(cli: Cli, fake_forge: FakeForge) -> None:
    env = _room(cli, fake_forge, "pull_request")
    job = _job_at_review(cli, env)
    [pull] = fake_forge.pulls(REPO)
    fake_forge.close_by_hand(REPO, pull.number)
    cli("approve", str(job))
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked"
    assert "closed on the forge, not by cairn" in blocked["diagnosis"]
    assert "never reopens it" in blocked["diagnosis"]
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["status"] == "blocked"
    assert [p.state for p in fake_forge.pulls(REPO)] == ["closed"], "never reopened"
    assert _opens(fake_forge) == 1


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_pull_request_and_merge_merges_through_the_api_respecting_protection(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge, "pull_request_and_merge")
    fake_forge.protect(REPO, "main", approvals=1, checks=["ci"])
    job = _approved_job(cli, env)
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "delivering")
    assert "approving review" in blocked["diagnosis"]
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "open" and not pull.draft, "marked ready before the merge was asked"
    fake_forge.add_review(REPO, pull.number, pull.author)  # the author's own: does not count
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert "approving review" in cli.show(job)["diagnosis"]
    fake_forge.add_review(REPO, pull.number, "bob")
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    checks = cli.show(job)
    assert checks["status"] == "blocked" and "required status check" in checks["diagnosis"]
    assert "ci" in checks["diagnosis"]
    fake_forge.set_check(REPO, pull.head, "ci", "success")
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "completed"
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "merged"
    assert fake_forge.branch_sha(REPO, "main") == pull.merge_sha
    assert _opens(fake_forge) == 1


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
