"""Acceptance harness: the real `cairn` console script, run as a subprocess.

Each test gets its own `CAIRN_HOME` under `tmp_path` (SQLite), a 2 s lease, the venv's `bin`
first on `PATH` (so `python` in scripts and verify commands is this interpreter) and a sample
repository at `tmp_path / "repo"`. Every call has a timeout, and every call checks that what
cairn printed names no local path of the test (cairn's home, the repository, the scripts).
Package downloads go to the session's cache (`package_downloads`), a path no output may name.

Fixtures:

- `cli`: a `Cli` whose home is already set up (`cairn init` plus member `alice`), copied from a
  template made once per session with the real CLI, so tests pay for setup once. Its group
  `default` lets policy approve runs (`run_approval=auto` for interactive and scheduled jobs),
  so a submitted job runs without a person at the run gate; tests of the run gate itself
  (tests/authority) start from a plain `cairn init`.
- `fresh_cli`: the same, with an empty home (for tests of `cairn init` and of errors before it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.repos import make_sample_repo

CAIRN = Path(sys.executable).parent / "cairn"
CALL_TIMEOUT = 60.0
DOWNLOADS = "CAIRN_PACKAGE_DOWNLOADS"
OWNER = ("-c", "user.name=Repo Owner", "-c", "user.email=owner@example.com")


def base_env(home: Path, tmp: Path) -> dict[str, str]:
    """The environment of every cairn call: no inherited CAIRN_* or GIT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "GIT_", "PYTEST_"))}
    if DOWNLOADS in os.environ:  # the session's package download cache (tests/conftest.py)
        env[DOWNLOADS] = os.environ[DOWNLOADS]
    git_config = tmp / "gitconfig"
    if not git_config.exists():
        git_config.write_text("")
    env |= {
        "CAIRN_HOME": str(home),
        "CAIRN_LEASE_SECONDS": "2",
        "PATH": f"{CAIRN.parent}{os.pathsep}{env.get('PATH', '')}",
        "GIT_CONFIG_GLOBAL": str(git_config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    return env


@dataclass
class Cli:
    """One cairn installation driven through its command line."""

    home: Path
    tmp: Path
    repo: Path
    env: dict[str, str]
    private: list[str] = field(default_factory=list)
    """Strings no output may contain: the local paths of this test."""
    scripts: int = 0

    def __call__(
        self,
        *args: str,
        expect: int | None = 0,
        timeout: float = CALL_TIMEOUT,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `cairn args`; assert its exit code (unless `expect` is None) and its privacy."""
        done = subprocess.run(
            [str(CAIRN), *args],
            env=self.env | (env or {}),
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        shown = f"cairn {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        if expect is not None:
            assert done.returncode == expect, shown
        self.assert_private(done.stdout + done.stderr, what=shown)
        assert "Traceback" not in done.stderr, shown
        return done

    def assert_private(self, text: str, what: str = "") -> None:
        shared = [self.env[DOWNLOADS]] if DOWNLOADS in self.env else []
        for secret in [*self.private, *shared]:
            assert secret not in text, f"output names the local path {secret!r}:\n{what or text}"

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def show(self, job_id: int) -> dict[str, Any]:
        detail = self.json("show", str(job_id))
        assert isinstance(detail, dict)
        return detail

    def branch(self, job_id: int) -> str:
        """The job's own branch, as `cairn show` names it."""
        branch = self.show(job_id)["branch"]
        assert isinstance(branch, str)
        return branch

    def script(self, text: str) -> Path:
        """Write a script agent's YAML to a file of its own and return its path."""
        self.scripts += 1
        path = self.tmp / "scripts" / f"agent-{self.scripts}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return path

    def room(self, name: str = "sample", verify: str | None = None) -> None:
        extra = ("--verify", verify) if verify else ()
        self("room", "create", name, "--repo", str(self.repo), *extra)

    def submit(self, script_text: str, request: str = "Change something", **kw: str) -> int:
        """Submit a script job to room `sample` as alice; return its id."""
        path = self.script(script_text)
        room = kw.get("room", "sample")
        actor = kw.get("as_user", "alice")
        out = self.json("submit", room, request, "--agent", f"script:{path}", "--as", actor)
        return int(out["id"])

    def work(self, timeout: float = CALL_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return self("work", "--until-idle", timeout=timeout)

    def git(self, *args: str, cwd: Path | None = None, check: bool = True) -> str:
        """Plain git (no cairn hardening) in the sample repository, as a person would run it."""
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
        )
        if check:
            assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def workspace(self, job_id: int) -> Path:
        """The job's worktree: the one folder `job-<id>` under `$CAIRN_HOME/workspaces`."""
        found = [p for p in self.home.glob(f"workspaces/**/job-{job_id}") if p.is_dir()]
        assert len(found) <= 1, found
        return found[0] if found else self.home / "workspaces" / f"job-{job_id}"


def _new_cli(tmp: Path, home: Path) -> Cli:
    repo = make_sample_repo(tmp / "repo")
    cli = Cli(home=home, tmp=tmp, repo=repo, env=base_env(home, tmp))
    cli.private = sorted({str(tmp), str(tmp.resolve()), str(home)}, key=len, reverse=True)
    return cli


@pytest.fixture(scope="session")
def template_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home set up once with the real CLI: `cairn init` (runs auto-approved), member `alice`."""
    tmp = tmp_path_factory.mktemp("template")
    home = tmp / "home"
    env = base_env(home, tmp)
    init = ["init", "--run-approval", "auto", "--auto-kinds", "interactive,scheduled"]
    for args in (init, ["user", "add", "alice"]):
        subprocess.run(
            [str(CAIRN), *args], env=env, check=True, capture_output=True, timeout=CALL_TIMEOUT
        )
    return home


@pytest.fixture
def cli(tmp_path: Path, template_home: Path) -> Cli:
    """An installation with group default, admin `admin` and member `alice`; no room yet."""
    home = tmp_path / "home"
    shutil.copytree(template_home, home)
    return _new_cli(tmp_path, home)


@pytest.fixture
def fresh_cli(tmp_path: Path) -> Cli:
    """An installation whose home does not exist yet."""
    return _new_cli(tmp_path, tmp_path / "home")


@pytest.fixture
def background(cli: Cli) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start `cairn args` in a session of its own; whatever is left is killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        logs.append(cli.tmp / f"background-{len(started)}.log")
        log = logs[-1].open("wb")
        process = subprocess.Popen(
            [str(CAIRN), *args],
            env=cli.env,
            cwd=cli.tmp,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=CALL_TIMEOUT)
    for path in logs:
        printed = path.read_text(errors="replace")
        cli.assert_private(printed)
        assert "Traceback" not in printed, printed


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` every 50 ms until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)
