"""A hostile review of pull-request delivery (issue 15): each test shows one defect found.

Everything runs through the real `cairn` CLI and runner against FakeForge over real HTTP.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.acceptance.conftest import CAIRN, CALL_TIMEOUT, Cli

from cairn.forges import ForgeSettings
from cairn.testing.fake_forge import FakeForge

pytestmark = pytest.mark.acceptance
REPO = "acme/app"
SCRIPT = """
steps:
  - write: {path: src/hello.py, content: "def hello():\\n    return 'hello'\\n"}
  - finish: {summary: "Added hello()."}
"""


def _room(cli: Cli, forge: FakeForge, delivery: str = "pull_request") -> dict[str, str]:
    assert forge.test_token is not None
    env = {"FORGE_TOKEN": forge.test_token}
    cli(
        "room", "create", "sample", "--forge", forge.kind, "--forge-repo", REPO,
        "--forge-url", forge.url, "--forge-token-env", "FORGE_TOKEN", "--delivery", delivery,
        env=env,
    )  # fmt: skip
    return env


def _job_at_review(cli: Cli, env: dict[str, str]) -> int:
    job = cli.submit(SCRIPT)
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "awaiting_review"
    return job


def _check(cli: Cli, forge: FakeForge) -> str:
    assert forge.test_token is not None
    done = cli("room", "check", "sample", env={"FORGE_TOKEN": forge.test_token}, expect=1)
    out = done.stdout + done.stderr
    assert forge.test_token not in out
    return out


def test_a_rate_limited_room_check_says_rate_limit_not_a_missing_permission(
    cli: Cli, fake_forge: FakeForge
) -> None:
    # GitHub answers a spent rate limit with 403 and x-ratelimit-remaining: 0. The token has
    # every permission: telling its owner to grant one sends them after the wrong thing.
    _room(cli, fake_forge)
    fake_forge.refuse(
        "GET", r"^/repos/acme/app$", 403, message="API rate limit exceeded",
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1999999999"},
    )  # fmt: skip
    out = _check(cli, fake_forge)
    assert "rate limit" in out and "wait until" in out
    assert "lacks" not in out


def test_a_429_is_a_rate_limit_to_wait_out(cli: Cli, fake_forge: FakeForge) -> None:
    _room(cli, fake_forge)
    fake_forge.refuse("GET", r"^/repos/acme/app$", 429, headers={"retry-after": "30"})
    out = _check(cli, fake_forge)
    assert "rate limit" in out and "30 s" in out


def test_a_forge_that_answers_502_blocks_the_job_which_resumes_to_one_pull_request(
    cli: Cli, fake_forge: FakeForge
) -> None:
    env = _room(cli, fake_forge)
    fake_forge.refuse("POST", r"/pulls$", 502, message="Bad Gateway")
    job = cli.submit(SCRIPT)
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked" and "502" in blocked["diagnosis"]
    assert "resume" in blocked["diagnosis"]
    cli("resume", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["stage"] == "awaiting_review"
    assert len(fake_forge.pulls(REPO)) == 1


def _push_stranger_commit(tmp: Path, forge: FakeForge, branch: str) -> str:
    """Someone force-pushes the pull request's head branch on the forge."""
    assert forge.test_token is not None
    url = forge.git_url(REPO).replace("http://", f"http://someone:{forge.test_token}@")
    work = tmp / "stranger"
    git = ["git", "-c", "user.name=Someone", "-c", "user.email=someone@example.com"]
    subprocess.run([*git, "clone", "-q", "-b", branch, url, str(work)], check=True)
    (work / "src" / "hello.py").write_text("import os\nos.system('curl evil')\n")
    subprocess.run([*git, "-C", str(work), "commit", "-qam", "mine now"], check=True)
    subprocess.run([*git, "-C", str(work), "push", "-qf", "origin", branch], check=True)
    return subprocess.run(
        ["git", "-C", str(work), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_approval_never_merges_a_head_someone_else_force_pushed(
    cli: Cli, fake_forge: FakeForge
) -> None:
    # The reviewer approved the job's commit; a stranger's commit pushed onto the pull
    # request's branch afterwards must not be merged in that approval's name.
    env = _room(cli, fake_forge, "pull_request_and_merge")
    job = _job_at_review(cli, env)
    [pull] = fake_forge.pulls(REPO)
    base = fake_forge.branch_sha(REPO, "main")
    stranger = _push_stranger_commit(cli.tmp, fake_forge, pull.head)
    cli("approve", str(job))
    cli("work", "--until-idle", env=env)
    blocked = cli.show(job)
    assert blocked["status"] == "blocked", blocked
    assert "never pushed" in blocked["diagnosis"]
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "open" and fake_forge.branch_sha(REPO, "main") == base
    assert fake_forge.branch_sha(REPO, pull.head) == stranger, "nor is it overwritten"


def test_a_cancelled_job_closes_its_draft_pull_request(cli: Cli, fake_forge: FakeForge) -> None:
    # A job cancelled at review left its draft open on the forge, where anyone could still
    # merge the work the team had just decided against.
    env = _room(cli, fake_forge)
    job = _job_at_review(cli, env)
    cli("cancel", str(job))
    assert [p.state for p in fake_forge.pulls(REPO)] == ["open"]
    cli("work", "--until-idle", env=env)
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "closed" and not pull.closed_by_hand
    assert pull.comments == ["Cancelled in cairn by admin"]
    cli("work", "--until-idle", env=env)
    assert fake_forge.pulls(REPO)[0].comments == ["Cancelled in cairn by admin"], "once"


def test_a_repository_named_with_dot_git_is_understood(cli: Cli, fake_forge: FakeForge) -> None:
    # `owner/name.git` is what one copies from a clone URL; it named `owner/name.git.git`, and
    # the failure blamed the token ("lacks read access") for a typo.
    assert fake_forge.test_token is not None
    done = cli(
        "room", "create", "sample", "--forge", "github", "--forge-repo", f"{REPO}.git",
        "--forge-url", fake_forge.url, "--forge-token-env", "FORGE_TOKEN",
        env={"FORGE_TOKEN": fake_forge.test_token}, expect=None,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "lacks" not in out
    assert "created on " in out and ".git.git" not in out


@pytest.mark.parametrize(
    "url",
    ["https://github.com/acme/app", "https://github.example.com?x=1", "https://github.com#top"],
)
def test_a_github_forge_url_with_a_path_or_query_is_refused(cli: Cli, url: str) -> None:
    # GitHub and GitHub Enterprise live at a host's root: a repository's page pasted as
    # --forge-url made the API `.../acme/app/api/v3` and every call fail later.
    done = cli(
        "room", "create", "sample", "--forge", "github", "--forge-repo", REPO,
        "--forge-url", url, "--forge-token-env", "FORGE_TOKEN",
        env={"FORGE_TOKEN": "ghp_x"}, expect=2,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert "--forge-url must be" in out, "refused as given, before any call"
    assert "git could not" not in out


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_no_file_cairn_writes_and_no_listing_holds_the_token(
    cli: Cli, fake_forge: FakeForge
) -> None:
    # The leak property test reads the store and `cairn show`; this reads every file under
    # cairn's home (the mirror's and workspaces' git config, logs, askpass leftovers) and
    # the listings, after a job was published, followed up on and rejected.
    env = _room(cli, fake_forge)
    job = _job_at_review(cli, env)
    cli("reject", str(job), "--reason", "not this way")
    cli("work", "--until-idle", env=env)
    assert fake_forge.pulls(REPO)[0].state == "closed"
    token = fake_forge.test_token
    assert token is not None
    said = [
        cli("jobs", env=env).stdout,
        cli("jobs", "--json", env=env).stdout,
        cli("show", str(job), "--json", env=env).stdout,
        cli("show", str(job), env=env).stdout,
    ]
    assert not [s for s in said if token in s]
    holding = [
        path
        for path in cli.home.rglob("*")
        if path.is_file() and not path.is_symlink() and token.encode() in path.read_bytes()
    ]
    assert holding == []


def test_an_approval_withdrawn_by_a_later_change_request_does_not_count(
    cli: Cli, fake_forge: FakeForge
) -> None:
    # GitHub counts each reviewer's latest decision: bob approved, then asked for changes.
    env = _room(cli, fake_forge)
    job = _job_at_review(cli, env)
    [pull] = fake_forge.pulls(REPO)
    fake_forge.add_review(REPO, pull.number, "bob", "approved")
    fake_forge.add_review(REPO, pull.number, "bob", "changes_requested")
    fake_forge.add_review(REPO, pull.number, "carol", "approved")
    shown = json.loads(cli("show", str(job), "--json", env=env).stdout)["pull_request"]
    assert shown["approvals"] == 1, shown["reviews"]


@pytest.mark.parametrize(
    "web", ["https://GitHub.com", "https://github.com/", "https://www.github.com"]
)
def test_github_com_in_any_spelling_is_served_by_api_github_com(web: str) -> None:
    assert ForgeSettings.parse("github", REPO, url=web, token_env="T").api_url == (
        "https://api.github.com"
    )


def test_a_github_enterprise_and_a_gitlab_api_are_under_the_forge_url() -> None:
    ghe = ForgeSettings.parse("github", REPO, url="https://ghe.example.com", token_env="T")
    assert ghe.api_url == "https://ghe.example.com/api/v3"
    lab = ForgeSettings.parse(
        "gitlab", "grp/sub/app", url="https://lab.example.com/gitlab/", token_env="T"
    )
    assert lab.api_url == "https://lab.example.com/gitlab/api/v4"
    assert lab.git_url == "https://lab.example.com/gitlab/grp/sub/app.git"


def test_commit_statuses_show_beside_check_runs(cli: Cli, fake_forge: FakeForge) -> None:
    # Jenkins, Buildkite and many others report GitHub commit statuses, not check runs;
    # branch protection requires them alike, yet `cairn show` listed check runs alone.
    env = _room(cli, fake_forge)
    job = _job_at_review(cli, env)
    [pull] = fake_forge.pulls(REPO)
    fake_forge.set_check(REPO, pull.head, "lint", "success")
    fake_forge.set_status(REPO, pull.head, "ci/jenkins", "failure")
    shown = json.loads(cli("show", str(job), "--json", env=env).stdout)["pull_request"]
    assert sorted(shown["checks"], key=lambda c: c["name"]) == [
        {"name": "ci/jenkins", "state": "failure"},
        {"name": "lint", "state": "success"},
    ]


def test_a_job_cancelled_after_its_pull_request_was_opened_but_not_recorded_closes_it(
    cli: Cli, fake_forge: FakeForge
) -> None:
    # The runner died after the forge opened the draft and before cairn recorded it; the job
    # is cancelled then, so no runner ever adopts it: the draft stayed open, orphaned.
    env = _room(cli, fake_forge)
    job = cli.submit(SCRIPT)
    killed = subprocess.run(
        [str(CAIRN), "work", "--until-idle"],
        env=cli.env | env | {"CAIRN_FAULTS": "crash:after_effect:pull_request"},
        cwd=cli.tmp, capture_output=True, text=True, timeout=CALL_TIMEOUT,
    )  # fmt: skip
    assert killed.returncode == 137, killed.stderr
    assert [p.state for p in fake_forge.pulls(REPO)] == ["open"]
    cli("cancel", str(job))
    cli("work", "--until-idle", env=env)
    assert cli.show(job)["status"] == "cancelled"
    [pull] = fake_forge.pulls(REPO)
    assert pull.state == "closed" and pull.comments == ["Cancelled in cairn by admin"]
