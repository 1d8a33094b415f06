"""A job in a room on a forge: fetched, pushed and merged over HTTPS with the room's token."""

from __future__ import annotations

import subprocess

import pytest
from tests.acceptance.conftest import Cli

from cairn.testing.fake_forge import FakeForge

pytestmark = pytest.mark.acceptance
REPO = "acme/app"
SCRIPT = """
steps:
  - write:
      path: src/hello.py
      content: |
        def hello() -> str:
            return "hello"
  - run: "env > seen-env.txt"
  - finish: {summary: "Added hello()."}
"""


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_a_forge_room_job_is_delivered_with_the_token_and_never_shows_it(
    cli: Cli, fake_forge: FakeForge
) -> None:
    token = fake_forge.test_token
    assert token is not None
    with_token = {"FORGE_TOKEN": token}
    cli(
        "room", "create", "sample", "--forge", fake_forge.kind, "--forge-repo", REPO,
        "--forge-url", fake_forge.url, "--forge-token-env", "FORGE_TOKEN", env=with_token,
    )  # fmt: skip
    base = fake_forge.branch_sha(REPO, "main")
    job = cli.submit(SCRIPT)
    outputs = [cli("work", "--until-idle", env=with_token)]
    assert cli.show(job)["stage"] == "awaiting_review"
    outputs.append(cli("approve", str(job)))
    outputs.append(cli("work", "--until-idle", env=with_token))
    done = cli.show(job)
    assert (done["status"], done["stage"]) == ("completed", "completed")
    assert [(e["kind"], e["status"]) for e in done["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    tip = fake_forge.branch_sha(REPO, "main")
    assert tip != base
    shown = subprocess.run(
        ["git", "show", f"{tip}:seen-env.txt"],
        cwd=fake_forge.world.repo_path(REPO), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "PATH=" in shown, "the command ran and its environment was delivered"
    assert token not in shown and "CAIRN_GIT_CREDENTIAL" not in shown
    pushes = [c for c in fake_forge.calls if c.path.endswith("git-receive-pack")]
    assert pushes and {c.user for c in pushes} == {"cairn-bot"}
    everything = "".join(o.stdout + o.stderr for o in outputs) + repr(done)
    assert token not in everything


def test_a_runner_without_the_token_variable_says_what_to_set(
    cli: Cli, fake_forge: FakeForge
) -> None:
    assert fake_forge.test_token is not None
    cli(
        "room", "create", "sample", "--forge", "github", "--forge-repo", REPO,
        "--forge-url", fake_forge.url, "--forge-token-env", "FORGE_TOKEN",
        env={"FORGE_TOKEN": fake_forge.test_token},
    )  # fmt: skip
    job = cli.submit(SCRIPT)
    cli("work", "--until-idle", expect=None)
    shown = cli.show(job)
    assert shown["stage"] != "completed"
    assert "FORGE_TOKEN" in str(shown["diagnosis"])
