"""`cairn room create --forge` and `cairn room check` through the real CLI, against FakeForge."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest
from tests.acceptance.conftest import CAIRN, Cli

from cairn.testing.fake_forge import READ, FakeForge

pytestmark = pytest.mark.acceptance
REPO = "acme/app"
SECRET_KEY = {"CAIRN_SECRET_KEY": "a-long-secret-key-for-the-tests"}


def _create(cli: Cli, forge: FakeForge, token: str, *extra: str, expect: int = 0) -> str:
    done = cli(
        "room", "create", "app", "--forge", forge.kind, "--forge-repo", REPO,
        "--forge-url", forge.url, "--forge-token-env", "FORGE_TOKEN", *extra,
        env={"FORGE_TOKEN": token}, expect=expect,
    )  # fmt: skip
    assert token not in done.stdout + done.stderr
    return done.stdout + done.stderr


def _check(cli: Cli, token: str, expect: int) -> str:
    done = cli("room", "check", "app", env={"FORGE_TOKEN": token}, expect=expect)
    assert token not in done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_a_forge_room_checks_out_with_a_read_write_token(cli: Cli, fake_forge: FakeForge) -> None:
    token = fake_forge.test_token
    assert token is not None
    assert "created on " in _create(cli, fake_forge, token, "--delivery", "push_and_merge")
    [room] = cli.json("room", "list")
    assert room["name"] == "app" and room["base"] == "main"
    out = _check(cli, token, expect=0)
    assert "MISSING" not in out and "push a cairn branch over git" in out
    assert fake_forge.branch_sha(REPO, "cairn/access-check") is None
    checked = cli("room", "check", "app", "--json", env={"FORGE_TOKEN": token})
    report = json.loads(checked.stdout)
    assert report["ok"] is True and len(report["checks"]) == 4


@pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
def test_a_read_only_token_fails_the_check_naming_the_push_permission(
    cli: Cli, fake_forge: FakeForge
) -> None:
    assert fake_forge.test_token is not None
    _create(cli, fake_forge, fake_forge.test_token)
    reader = fake_forge.add_token(scopes={READ})
    out = _check(cli, reader, expect=1)
    needed = "Contents: read and write" if fake_forge.kind == "github" else "Developer role"
    assert "MISSING push a branch" in out and needed in out
    assert "MISSING read" not in out


def test_a_wrong_token_fails_the_check_and_is_never_printed(
    cli: Cli, fake_forge: FakeForge
) -> None:
    assert fake_forge.test_token is not None
    _create(cli, fake_forge, fake_forge.test_token)
    out = _check(cli, "ghp_wrongTokenValue123456", expect=1)
    assert "401" in out and "wrong, expired or revoked" in out
    assert "ghp_wrongTokenValue123456"[4:16] not in out


def test_room_create_refuses_a_token_that_cannot_read(cli: Cli, fake_forge: FakeForge) -> None:
    blind = fake_forge.add_token(scopes=())
    out = _create(cli, fake_forge, blind, expect=2)
    assert "cannot read acme/app" in out and "room check" in out
    assert cli.json("room", "list") == []


def test_room_create_says_which_variable_to_set(cli: Cli, fake_forge: FakeForge) -> None:
    done = cli(
        "room", "create", "app", "--forge", "github", "--forge-repo", REPO,
        "--forge-url", fake_forge.url, "--forge-token-env", "FORGE_TOKEN", expect=2,
    )  # fmt: skip
    assert "FORGE_TOKEN, which is not set" in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--forge", "bitbucket", "--forge-repo", REPO), "the forges are: github, gitlab"),
        (("--forge", "github", "--forge-repo", "no-owner"), "owner/name"),
        (("--forge", "github", "--forge-repo", REPO), "--forge-token-env"),
        (("--repo", ".", "--delivery", "pull_request"), "needs a forge"),
        (("--repo", ".", "--delivery", "carrier-pigeon"), "the deliveries are"),
    ],
)
def test_bad_forge_options_are_usage_errors(cli: Cli, args: tuple[str, ...], says: str) -> None:
    done = cli("room", "create", "app", *args, expect=2)
    assert says in done.stderr


def test_a_stored_credential_is_encrypted_and_checks_out(cli: Cli, fake_forge: FakeForge) -> None:
    token = fake_forge.test_token
    assert token is not None
    stored = subprocess.run(
        [str(CAIRN), "credential", "set", "bot"], input=token + "\n", env=cli.env | SECRET_KEY,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    assert token not in stored.stdout + stored.stderr
    cli(
        "room", "create", "app", "--forge", "github", "--forge-repo", REPO,
        "--forge-url", fake_forge.url, "--forge-credential", "bot", env=SECRET_KEY,
    )  # fmt: skip
    assert "MISSING" not in cli("room", "check", "app", env=SECRET_KEY).stdout
    assert cli.json("credential", "list") == ["bot"]
    wrong_key = cli("room", "check", "app", env={"CAIRN_SECRET_KEY": "x" * 20}, expect=2)
    assert "cannot be read with this CAIRN_SECRET_KEY" in wrong_key.stderr
    with sqlite3.connect(cli.home / "cairn.db") as db:
        dumped = "\n".join(db.iterdump())
    assert token not in dumped and token[5:17] not in dumped


def test_a_room_may_not_read_its_forge_token_from_cairn_secret_key(
    cli: Cli, fake_forge: FakeForge
) -> None:
    """CAIRN_SECRET_KEY decrypts every stored credential: naming it (or any CAIRN_* variable)
    as the forge token is refused before any request reaches the forge."""
    done = cli(
        "room", "create", "app", "--forge", fake_forge.kind, "--forge-repo", REPO,
        "--forge-url", fake_forge.url, "--forge-token-env", "CAIRN_SECRET_KEY",
        env={"CAIRN_SECRET_KEY": "a-master-key-of-enough-length-123"}, expect=2,
    )  # fmt: skip
    assert "CAIRN_" in done.stderr and "may not" in done.stderr, done.stderr
    assert fake_forge.calls == (), "the master key was offered to the forge"


def test_a_forge_url_over_plain_http_to_a_remote_host_is_refused(cli: Cli) -> None:
    """Over plain http the token would cross the network in clear: only loopback goes
    without TLS."""
    done = cli(
        "room", "create", "app", "--forge", "github", "--forge-repo", REPO,
        "--forge-url", "http://forge.invalid", "--forge-token-env", "FORGE_TOKEN",
        env={"FORGE_TOKEN": "fake_token_value"}, expect=2,
    )  # fmt: skip
    assert "https://" in done.stderr, done.stderr


def _said_ok(cli: Cli, token: str) -> list[str]:
    done = cli("room", "check", "app", "--json", env={"FORGE_TOKEN": token}, expect=1)
    report = json.loads(done.stdout)
    assert report["ok"] is False
    return [line["what"] for line in report["checks"] if line["ok"]]


def test_room_check_with_a_wrong_token_says_nothing_is_ok(cli: Cli, fake_forge: FakeForge) -> None:
    """A refused read stops both probes before any push is tried: the push lines are not
    checked, never ok."""
    assert fake_forge.test_token is not None
    _create(cli, fake_forge, fake_forge.test_token)
    assert _said_ok(cli, "fake_wrong") == []
    out = _check(cli, "fake_wrong", expect=1)
    assert "NOT CHECKED push a branch, as the API reports it: not checked" in out
    assert "NOT CHECKED push a cairn branch over git (dry run)" in out


def test_room_check_with_a_token_that_cannot_see_the_repo_does_not_say_push_is_ok(
    cli: Cli, fake_forge: FakeForge
) -> None:
    """The API answers 404 for a repository the token cannot see; that says nothing about
    pushing."""
    assert fake_forge.test_token is not None
    _create(cli, fake_forge, fake_forge.test_token)
    blind = fake_forge.add_token(user="stranger", scopes=())
    assert _said_ok(cli, blind) == []


def test_the_missing_secret_key_message_is_not_mangled_by_the_masker(cli: Cli) -> None:
    done = subprocess.run(
        [str(CAIRN), "credential", "set", "gh"], input="fake_token_value\n",
        env=cli.env, cwd=cli.tmp, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "[secret]" not in done.stderr and "set it to a long random value" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--forge", "github", "--forge-repo", REPO),
        ("--forge", "github", "--forge-repo", REPO, "--forge-token-env", "1BAD"),
    ],
)
def test_forge_option_errors_are_not_mangled_by_the_masker(cli: Cli, args: tuple[str, ...]) -> None:
    done = cli("room", "create", "app", *args, expect=2)
    assert "--forge-token-env" in done.stderr and "[secret]" not in done.stderr, done.stderr


def _store_credential(cli: Cli, name: str, token: str) -> None:
    stored = subprocess.run(
        [str(CAIRN), "credential", "set", name], input=token + "\n", env=cli.env | SECRET_KEY,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stored.returncode == 0, stored.stderr


def test_a_stored_credential_can_be_removed(cli: Cli) -> None:
    _store_credential(cli, "old", "fake_old")
    _store_credential(cli, "kept", "fake_kept")
    removed = cli("credential", "remove", "old", env=SECRET_KEY)
    assert "credential old removed" in removed.stdout
    assert cli.json("credential", "list") == ["kept"]
    with sqlite3.connect(cli.home / "cairn.db") as db:
        assert db.execute("SELECT count(*) FROM credentials").fetchone() == (1,)
    gone = cli("credential", "remove", "old", expect=1)
    assert "no stored credential 'old'" in gone.stderr


def test_a_credential_a_room_names_is_not_removed(cli: Cli, fake_forge: FakeForge) -> None:
    assert fake_forge.test_token is not None
    _store_credential(cli, "bot", fake_forge.test_token)
    cli(
        "room", "create", "app", "--forge", "github", "--forge-repo", REPO,
        "--forge-url", fake_forge.url, "--forge-credential", "bot", env=SECRET_KEY,
    )  # fmt: skip
    refused = cli("credential", "remove", "bot", expect=1)
    assert "still named by room app" in refused.stderr
    assert cli.json("credential", "list") == ["bot"]


def test_only_an_admin_removes_a_credential(cli: Cli) -> None:
    _store_credential(cli, "old", "fake_old")
    cli("user", "add", "bob")
    refused = cli("credential", "remove", "old", "--as", "bob", expect=1)
    assert "remove forge credentials" in refused.stderr
    assert cli.json("credential", "list") == ["old"]
