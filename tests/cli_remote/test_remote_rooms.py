"""`cairn room create` and `cairn room rebind` through the server, against FakeForge.

Through the API a room's repository is a forge's (read with a stored credential) or a remote
git URL: a remote caller must never name the server's files, so a local path is refused, and
the refusal never repeats the path.
"""

from __future__ import annotations

import subprocess

from authority.conftest import cli, strict_home  # noqa: F401
from cairn.testing.fake_forge import FakeForge
from cli_remote.test_remote_admin import _with_input, served  # noqa: F401
from cli_remote.test_remote_cli import Served

REPO = "acme/app"


def _forge_room(server: Served, forge: FakeForge, who: str, name: str, expect: int = 0) -> str:
    return server.remote(
        who, "room", "create", name, "--forge", forge.kind, "--forge-repo", REPO,
        "--forge-url", forge.url, "--forge-credential", "bot", expect=expect,
    )  # fmt: skip


def _store_credential(server: Served, forge: FakeForge) -> None:
    assert forge.test_token is not None
    remote = {"CAIRN_URL": server.url, "CAIRN_TOKEN": server.tokens["admin"]}
    stored = _with_input(server.cli, ["credential", "set", "bot"], forge.test_token, remote)
    assert stored.returncode == 0, stored.stderr


def test_an_admin_creates_a_forge_room_through_the_server_and_a_member_is_refused(
    served: Served,  # noqa: F811
    fake_forge: FakeForge,
) -> None:
    _store_credential(served, fake_forge)
    made = _forge_room(served, fake_forge, "admin", "app")
    assert made == f"room app created on {fake_forge.kind} {REPO}, on branch main\n"
    listed = served.remote("admin", "room", "list")
    assert "app  (group default, base main)" in listed
    assert listed == served.cli("room", "list").stdout
    refused = _forge_room(served, fake_forge, "alice", "mine", expect=1)
    assert "only an admin of group default can create a room for it" in refused
    assert "Traceback" not in refused
    assert "mine" not in served.cli("room", "list").stdout
    assert fake_forge.test_token not in made + refused + listed


def test_a_local_path_is_refused_through_the_server_without_echoing_it(
    served: Served,  # noqa: F811
) -> None:
    path = str(served.cli.repo)
    for repo in (path, f"file://{path}", "../elsewhere"):
        said = served.remote("admin", "room", "create", "local", "--repo", repo, expect=2)
        assert "create or rebind such a room on the cairn host itself" in said
        assert repo not in said and "Traceback" not in said
        said = served.remote("admin", "room", "rebind", "sample", "--repo", repo, expect=2)
        assert "on the cairn host itself" in said and repo not in said
    assert "local" not in served.cli("room", "list").stdout
    # The server's environment is its owner's: a forge token from it is named on the host.
    said = served.remote(
        "admin", "room", "create", "env", "--forge", "github", "--forge-repo", REPO,
        "--forge-token-env", "HOME", expect=2,
    )  # fmt: skip
    assert "--forge-credential" in said and "on the cairn host itself" in said


def test_an_admin_rebinds_a_forge_room_through_the_server(
    served: Served,  # noqa: F811
    fake_forge: FakeForge,
) -> None:
    _store_credential(served, fake_forge)
    _forge_room(served, fake_forge, "admin", "app")
    bare = fake_forge.world.repo_path(REPO)
    subprocess.run(["git", "-C", str(bare), "branch", "develop", "main"], check=True)
    git_url = fake_forge.git_url(REPO)
    refused = served.remote("alice", "room", "rebind", "app", "--repo", git_url, expect=1)
    assert "only an admin of group default can rebind its rooms" in refused
    said = served.remote("admin", "room", "rebind", "app", "--repo", git_url, "--base", "develop")
    assert said == "room app now works on branch develop; jobs requested earlier will block\n"
    assert "app  (group default, base develop)" in served.cli("room", "list").stdout
    missing = served.remote(
        "admin", "room", "rebind", "app", "--repo", git_url, "--base", "nope", expect=2
    )
    assert "Traceback" not in missing and fake_forge.test_token not in missing
