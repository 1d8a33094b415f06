"""Set-up as a new user meets it: a private home, a store that says what is wrong with it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from .conftest import CAIRN, CALL_TIMEOUT, Cli

pytestmark = pytest.mark.acceptance

# Root writes through any file mode. To meet a read-only file the way a user does, the command
# runs without the capabilities that let root ignore modes; an ordinary user needs nothing.
UNPRIVILEGED = (
    ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]
    if os.geteuid() == 0
    else []
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def as_user(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `cairn args` with the file permissions of an ordinary user; expect a refusal."""
    if UNPRIVILEGED and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to bind")
    done = subprocess.run(
        [*UNPRIVILEGED, str(CAIRN), *args],
        env=cli.env,
        cwd=cli.tmp,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    shown = f"cairn {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 1, shown
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, shown
    cli.assert_private(done.stdout + done.stderr, what=shown)
    return done


def test_init_creates_the_home_0700_and_the_store_0600(fresh_cli: Cli) -> None:
    fresh_cli("init")
    assert _mode(fresh_cli.home) == 0o700
    assert _mode(fresh_cli.home / "cairn.db") == 0o600
    assert [p.name for p in fresh_cli.home.glob("cairn.db-*")] == [], "journal files closed"


def test_a_read_only_store_file_is_called_read_only(cli: Cli) -> None:
    store = cli.home / "cairn.db"
    store.chmod(0o444)
    for command in (["jobs"], ["user", "add", "bob"]):
        said = as_user(cli, *command).stderr
        assert "store file is read-only" in said and "chmod u+w" in said, said
    store.chmod(0o600)
    assert "bob" not in cli("user", "list").stdout, "the refused command changed nothing"


def test_a_read_only_home_is_called_read_only(cli: Cli) -> None:
    cli.home.chmod(0o500)
    try:
        said = as_user(cli, "jobs").stderr
    finally:
        cli.home.chmod(0o700)
    assert "home folder is read-only" in said and "writable" in said, said
    assert "cannot reach" not in said
    assert cli.json("jobs") == [], "the store is intact once the folder is writable again"


def test_init_under_a_read_only_folder_says_it_cannot_create_the_home(fresh_cli: Cli) -> None:
    parent = fresh_cli.tmp / "locked"
    parent.mkdir(mode=0o500)
    said = as_user(fresh_cli, "--home", str(parent / "home"), "init").stderr
    assert "cannot create cairn's home folder" in said and "read-only" in said, said
    assert not (parent / "home").exists()


def test_a_damaged_store_file_is_called_damaged(cli: Cli) -> None:
    store = cli.home / "cairn.db"
    store.write_bytes(b"not a database, just some bytes\n" * 100)
    done = cli("jobs", expect=1)
    assert done.stderr.strip() == (
        "error: the store file is not a cairn store (it is damaged, or another file took its "
        "name); restore it from a backup, or point --home / CAIRN_HOME at the right home"
    )
    assert store.read_bytes().startswith(b"not a database"), "cairn left the file alone"


@pytest.mark.postgres
def test_a_plain_postgresql_url_works_from_the_cli(fresh_cli: Cli, postgres_url: str) -> None:
    plain = sa.engine.make_url(postgres_url).set(drivername="postgresql")
    env = {"CAIRN_DATABASE_URL": plain.render_as_string(hide_password=False)}
    assert env["CAIRN_DATABASE_URL"].startswith("postgresql://")
    fresh_cli("init", env=env)
    fresh_cli("user", "add", "alice", env=env)
    assert "alice" in fresh_cli("user", "list", env=env).stdout
    assert not fresh_cli.home.joinpath("cairn.db").exists(), "no SQLite store beside it"
