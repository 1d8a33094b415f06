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
from .paths import path_without

pytestmark = pytest.mark.acceptance
ROOT = Path(__file__).resolve().parents[2]

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


class Machine:
    """A PATH without bubblewrap or a package manager, plus fakes that stand in for them."""

    def __init__(self, tmp: Path, *, uid: int) -> None:
        self.fakes = tmp / "fakes"
        self.fakes.mkdir()
        self.log = tmp / "apt-get.log"
        hidden = ("bwrap", "node", "npm", "apt-get", "dnf", "pacman", "id")
        self.path = (
            f"{self.fakes}{os.pathsep}{path_without(tmp / 'bin', os.environ['PATH'], *hidden)}"
        )
        self.fake("id", f"echo {uid}")

    def fake(self, name: str, body: str) -> None:
        program = self.fakes / name
        program.write_text(f"#!/bin/sh\n{body}\n")
        program.chmod(0o755)

    def apt_get(self, *, installs: bool) -> None:
        """A fake apt-get that logs its calls and, on install, puts the programs in place."""
        put = "".join(
            f"printf '#!/bin/sh\\n' > {self.fakes}/{p}; chmod +x {self.fakes}/{p}; "
            for p in ("bwrap", "node", "npm")
        )
        install = put if installs else "echo 'E: Unable to locate package' >&2; exit 100"
        self.fake(
            "apt-get",
            f'echo "$DEBIAN_FRONTEND $*" >> {self.log}\ncase "$1" in install) {install} ;; esac',
        )

    def run(self, *argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        env = {"PATH": self.path, "HOME": str(self.fakes), "LANG": "C.UTF-8"}
        return subprocess.run(
            list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=CALL_TIMEOUT
        )

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def test_a_user_who_cannot_install_gets_one_line_naming_the_package(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=1000)
    machine.apt_get(installs=True)
    done = machine.run("sh", "scripts/require-tools", "bubblewrap")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "cairn needs bubblewrap: run  sudo apt-get install bubblewrap\n"
    assert machine.calls() == [], "nothing is installed without root"


def test_without_apt_get_the_line_says_to_use_the_package_manager(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=0)
    done = machine.run("sh", "scripts/require-tools", "bubblewrap", "nodejs", "npm")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "cairn needs bubblewrap, nodejs, npm: install bubblewrap nodejs npm with your "
        "system's package manager\n"
    )


def test_root_with_apt_get_installs_what_is_missing_without_questions(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=0)
    machine.apt_get(installs=True)
    done = machine.run("sh", "scripts/require-tools", "bubblewrap", "nodejs", "npm")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cairn needs bubblewrap, nodejs, npm; installing with apt-get...\n"
    assert machine.calls() == [
        "noninteractive update -qq",
        "noninteractive install -y -qq --no-install-recommends bubblewrap nodejs npm",
    ]
    again = machine.run("sh", "scripts/require-tools", "bubblewrap", "nodejs", "npm")
    assert again.returncode == 0 and len(machine.calls()) == 2, "installed: nothing to do"


def test_a_failed_apt_get_install_stops_with_one_line(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=0)
    machine.apt_get(installs=False)
    done = machine.run("sh", "scripts/require-tools", "bubblewrap")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == "E: Unable to locate package", "apt says why"
    assert done.stderr.splitlines()[-1] == (
        "cairn needs bubblewrap, and apt-get could not install it: run  apt-get install "
        "bubblewrap  and see what it says"
    )


@pytest.mark.parametrize(
    ("target", "needs"), [("demo", "bubblewrap:"), ("test", "bubblewrap, nodejs, npm:")]
)
def test_make_stops_before_anything_runs_when_a_tool_is_missing(
    tmp_path: Path, target: str, needs: str
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, checkout / name)
    shutil.copytree(ROOT / "scripts", checkout / "scripts")
    machine = Machine(tmp_path, uid=1000)
    done = machine.run("make", target, cwd=checkout)
    assert done.returncode != 0
    assert done.stdout == "", "nothing ran: no venv, no install, no demo"
    assert done.stderr.splitlines()[0].startswith(f"cairn needs {needs}")
    assert "sudo apt-get install" not in done.stderr, "no apt-get on this machine"
    assert not (checkout / ".venv").exists()
