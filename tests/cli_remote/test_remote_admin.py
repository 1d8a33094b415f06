"""People, groups, policy, credentials and the decision ledger through the server.

As in test_remote_cli.py, the real `cairn` command runs once locally (the store owner's
tool) and once with CAIRN_URL and a token; the two must print the same, except that through
the server the token alone says who acts and a member is refused what the CLI refuses them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from acceptance.conftest import CAIRN, Cli
from api.conftest import serve
from authority.conftest import WRITE_B, cli, strict_home  # noqa: F401
from cairn.api import create_app
from cairn.config import Config

from .test_remote_cli import Served

SECRET_KEY = {"CAIRN_SECRET_KEY": "a-long-secret-key-for-the-remote-tests"}
FORGE_TOKEN = "ghp_" + "s3cr3tforge" * 3


@pytest.fixture
def served(cli: Cli) -> Iterator[Served]:  # noqa: F811
    cli.env |= SECRET_KEY
    cli("room", "create", "sample", "--repo", str(cli.repo))
    tokens = {name: cli.json("user", "token", name)["token"] for name in ("admin", "alice")}
    with serve(create_app(Config.from_env(cli.env))) as url:
        yield Served(cli=cli, url=url, tokens=tokens)


def test_an_admin_adds_a_user_whose_token_then_works_and_a_member_is_refused(
    served: Served,
) -> None:
    said = served.remote("admin", "user", "add", "Dora")
    lines = said.splitlines()
    assert lines[:2] == [
        "user dora added to group default as member",
        "API token for dora, shown this once (`cairn user token dora` replaces it):",
    ]
    served.tokens["dora"] = lines[2]
    assert served.remote("dora", "jobs", "--json") == "[]\n"
    refused = served.remote("alice", "user", "add", "eve", expect=1)
    assert "only an admin of group default can add people to it" in refused
    assert "Traceback" not in refused
    assert "eve" not in served.cli("user", "list").stdout
    made = served.remote("admin", "user", "add", "fay", "--admin", "--json")
    assert '"role": "admin"' in made and '"token": "cairn_' in made
    for args in (("user", "list", "--json"), ("user", "list")):
        assert served.remote("admin", *args) == served.cli(*args).stdout, args
    assert "only an admin of a group can list the users" in served.remote(
        "alice", "user", "list", expect=1
    )


def test_a_user_replaces_their_own_token_and_the_old_one_stops(served: Served) -> None:
    old = served.tokens["alice"]
    said = served.remote("alice", "user", "token", "alice").splitlines()
    assert said[0].startswith("API token for alice, shown this once")
    assert said[1] != old and said[1].startswith("cairn_")
    assert "does not accept CAIRN_TOKEN" in served.remote("alice", "jobs", expect=1)
    served.tokens["alice"] = said[1]
    assert served.remote("alice", "jobs", "--json") == "[]\n"
    refused = served.remote("alice", "user", "token", "admin", expect=1)
    assert "only admin or an admin of one of admin's groups" in refused


def test_groups_and_their_policy_through_the_server(served: Served) -> None:
    made = served.remote("admin", "group", "add", "ops", "--dependency-approval", "member")
    assert made.startswith("group ops created with admin admin: ")
    assert "only an admin of a group can create a group" in served.remote(
        "alice", "group", "add", "mine", expect=1
    )
    for args in (("group", "policy", "ops"), ("group", "policy", "ops", "--json")):
        assert served.remote("admin", *args) == served.cli(*args).stdout, args
    changed = served.remote(
        "admin", "group", "policy", "ops", "--run-approval", "auto", "--reason", "trusted"
    )
    assert changed.startswith("group ops: ") and "(was " in changed
    same = served.remote("admin", "group", "policy", "ops", "--run-approval", "auto")
    assert same == "group ops already has that policy; nothing changed\n"
    refused = served.remote(
        "alice", "group", "policy", "default", "--dependency-approval", "member", expect=1
    )
    assert "only an admin of group default can change its policy" in refused
    log = served.cli("audit", "log", "--policy", "--json").stdout
    assert '"actor": "admin"' in log and "trusted" in log and "alice" not in log


def test_credentials_go_in_by_standard_input_and_never_come_back(served: Served) -> None:
    remote = {"CAIRN_URL": served.url, "CAIRN_TOKEN": served.tokens["admin"]}
    stored = _with_input(served.cli, ["credential", "set", "bot"], FORGE_TOKEN, remote)
    assert stored.returncode == 0, stored.stderr
    assert "credential bot stored, encrypted" in stored.stdout
    for args in (("credential", "list"), ("credential", "list", "--json")):
        listed = served.remote("admin", *args)
        assert listed == served.cli(*args).stdout and "bot" in listed, args
    member = {"CAIRN_URL": served.url, "CAIRN_TOKEN": served.tokens["alice"]}
    refused = _with_input(served.cli, ["credential", "set", "mine"], FORGE_TOKEN, member)
    assert refused.returncode == 1
    assert "only an admin of group default can store forge credentials" in refused.stderr
    assert "only an admin of a group" in served.remote("alice", "credential", "list", expect=1)
    assert "credential bot removed" in served.remote("admin", "credential", "remove", "bot")
    assert served.cli("credential", "list").stdout == ""
    assert "no stored credential" in served.remote("admin", "credential", "remove", "bot", expect=1)
    for done in (stored, refused):
        assert FORGE_TOKEN not in done.stdout + done.stderr


def test_the_decision_ledger_reads_the_same_through_the_server(served: Served) -> None:
    script = served.cli.script(WRITE_B)
    job = served.cli("submit", "sample", "add b", "--agent", f"script:{script}").stdout.strip()
    served.cli("reject", job, "--reason", "not now")
    for args in (
        ("audit", "head"),
        ("audit", "head", "--json"),
        ("audit", "log"),
        ("audit", "log", "--json"),
        ("audit", "log", "--job", job, "--json"),
        ("audit", "log", "--policy"),
    ):
        assert served.remote("admin", *args) == served.cli(*args).stdout, args
    assert "not now" in served.remote("admin", "audit", "log")
    assert "only an admin of a group" in served.remote("alice", "audit", "log", expect=1)


def test_room_check_goes_through_the_server_as_its_admin(served: Served) -> None:
    refused = served.remote("alice", "room", "check", "sample", expect=1)
    assert "only an admin of group default can check its rooms" in refused
    local = served.cli("room", "check", "sample", expect=2)
    said = served.remote("admin", "room", "check", "sample", expect=2)
    assert said == local.stdout + local.stderr and "has no forge to check" in said


def test_a_rooms_default_agent_is_set_through_the_server_by_its_admin(served: Served) -> None:
    served.cli("agent", "add", "qwen", "--adapter", "openai", "--model", "q")
    refused = served.remote("alice", "room", "set-agent", "sample", "qwen", expect=1)
    assert "only an admin of group default can change its rooms' default agent" in refused
    said = served.remote("admin", "room", "set-agent", "sample", "qwen")
    assert said == "room sample: jobs submitted without --agent use agent qwen\n"
    assert '"agent": "qwen"' in served.cli("room", "list", "--json").stdout
    assert "there is no agent named" in served.remote(
        "admin", "room", "set-agent", "sample", "nope", expect=1
    )
    cleared = served.remote("admin", "room", "set-agent", "sample", "--clear")
    assert cleared == "room sample has no default agent now; each job names its own\n"
    assert '"agent": null' in served.cli("room", "list", "--json").stdout


def test_a_member_may_neither_create_nor_rebind_a_room_through_the_server(
    served: Served,
) -> None:
    for args, refusal in (
        (("room", "create", "other", "--repo", "x"), "create a room for it"),
        (("room", "rebind", "sample", "--repo", "x"), "rebind its rooms"),
    ):
        said = served.remote("alice", *args, expect=1)
        assert f"only an admin of group default can {refusal}" in said, args
        assert "Traceback" not in said, args


def _with_input(
    runner: Cli, args: list[str], secret: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`cairn args` with `secret` on standard input, as a script pipes a token in."""
    return subprocess.run(
        [str(CAIRN), *args],
        input=secret + "\n",
        env=runner.env | env,
        cwd=runner.tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
