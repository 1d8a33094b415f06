"""A team under the strict default policy, on both store backends, and jobs placed at gates.

Fixtures:

- `team`: a `Cairn` (see tests/jobs/conftest.py) whose group `default` keeps the default
  policy (every run and dependency waits for an admin). People: admins `admin` and `bob`,
  member `alice`, and `carol`, who belongs only to group `others`. Room `sample` belongs to
  `default`.
- `cli`: the real `cairn` command (tests/acceptance's harness) on a home made by a plain
  `cairn init` (the strict default policy) plus member `alice`; no room yet.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from acceptance.conftest import Cli, base_env
from cairn.config import Config
from cairn.stages import Stage
from cairn.store import Store, identity
from cairn.store.rooms import create_room
from cairn.testing.repos import make_sample_repo
from jobs.conftest import Cairn

WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'
ASKS_FOR_RICH = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - write: {path: a2.txt, content: "after the decision\\n"}
  - finish: {summary: "a.txt and a2.txt"}
"""
STAGE_OF_GATE = {
    "run": Stage.awaiting_run_approval,
    "dependency": Stage.awaiting_dependency_approval,
    "integration": Stage.awaiting_review,
}
PEOPLE = {"admin": "admin", "bob": "admin", "alice": "member"}


@pytest.fixture
def team(store: Store, tmp_path: Path, package_downloads: Path) -> Iterator[Cairn]:
    config = Config(home=tmp_path / "home", lease_seconds=2, package_downloads=package_downloads)
    repo = make_sample_repo(tmp_path / "repo")
    with store.begin() as conn:
        group = identity.add_group(conn, "default")
        for name, role in PEOPLE.items():
            identity.set_membership(conn, group.id, identity.add_user(conn, name).id, role)
        others = identity.add_group(conn, "others")
        identity.set_membership(conn, others.id, identity.add_user(conn, "carol").id, "admin")
        create_room(conn, name="sample", group_id=group.id, repo=str(repo), base_branch="main")
    yield Cairn(store=store, config=config, repo=repo, tmp=tmp_path)


@pytest.fixture(scope="session")
def strict_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home made once per session by a plain `cairn init` and `cairn user add alice`."""
    tmp = tmp_path_factory.mktemp("strict")
    made = Cli(home=tmp / "home", tmp=tmp, repo=tmp, env=base_env(tmp / "home", tmp))
    made("init")
    made("user", "add", "alice")
    return made.home


@pytest.fixture
def cli(tmp_path: Path, strict_home: Path) -> Cli:
    home = tmp_path / "home"
    shutil.copytree(strict_home, home)
    repo = make_sample_repo(tmp_path / "repo")
    made = Cli(home=home, tmp=tmp_path, repo=repo, env=base_env(home, tmp_path))
    made.private = sorted({str(tmp_path), str(tmp_path.resolve())}, key=len, reverse=True)
    return made
